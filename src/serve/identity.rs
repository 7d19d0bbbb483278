//! Who may connect: the host key, key fingerprints, and `[operators]` by fingerprint.

use std::collections::HashMap;
use std::path::Path;

use russh::keys::PrivateKey;
use russh::keys::ssh_key::{HashAlg, LineEnding, PublicKey};

use crate::config::Config;
use crate::domain::Role;
use crate::error::{Error, Result};

/// The host key at `path`, made (ed25519, mode 0600) when there is none.
pub fn host_key(path: &Path) -> Result<PrivateKey> {
    let bad =
        |e: &dyn std::fmt::Display| Error::Invalid(format!("--host-key {}: {e}", path.display()));
    match std::fs::read_to_string(path) {
        Ok(text) => PrivateKey::from_openssh(text.trim_end()).map_err(|e| bad(&e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut seed = [0u8; 32];
            rand::Rng::fill(&mut rand::rng(), &mut seed);
            let pair = russh::keys::ssh_key::private::Ed25519Keypair::from_seed(&seed);
            let key = PrivateKey::from(pair);
            let text = key.to_openssh(LineEnding::LF).map_err(|e| bad(&e))?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| bad(&e))?;
            }
            write_private(path, text.as_bytes()).map_err(|e| bad(&e))?;
            Ok(key)
        }
        Err(e) => Err(bad(&e)),
    }
}

/// Writes a new file only its owner can read, all or nothing (a temporary file renamed).
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// `[operators]` as the server reads it: a key's fingerprint to its operator and role.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Operators(pub(super) HashMap<String, (String, Role)>);

impl Operators {
    pub fn from_config(config: &Config) -> Result<Operators> {
        let mut map = HashMap::new();
        for (name, o) in &config.operators {
            for line in &o.keys {
                let key = PublicKey::from_openssh(line.trim()).map_err(|e| {
                    Error::Invalid(format!("operators.{name}.keys: not a public key: {e}"))
                })?;
                if let Some((other, _)) = map.insert(fingerprint(&key), (name.clone(), o.role))
                    && other != *name
                {
                    return Err(Error::Invalid(format!(
                        "operators.{name}.keys: the same key is also {other}'s"
                    )));
                }
            }
        }
        Ok(Operators(map))
    }

    pub(super) fn lookup(&self, fingerprint: &str) -> Option<&(String, Role)> {
        self.0.get(fingerprint)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
