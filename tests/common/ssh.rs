//! SSH for the tests of `settle serve`: operators' ed25519 keys made by `ssh-keygen`, the
//! config naming them, and the options of OpenSSH's own client.

use std::path::PathBuf;
use std::process::Command;

/// Four ed25519 keys (three operators and a stranger) and the config naming the three.
pub struct Keys {
    pub dir: tempfile::TempDir,
}

impl Keys {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Keys {
        let dir = tempfile::tempdir().unwrap();
        for name in ["viewer", "oper", "lead", "stranger"] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
                .arg(dir.path().join(name))
                .status()
                .expect("ssh-keygen")
                .success();
            assert!(ok, "ssh-keygen {name}");
        }
        let k = Keys { dir };
        k.write_config(&[
            ("vera", "viewer", "viewer"),
            ("olga", "operator", "oper"),
            ("leo", "lead", "lead"),
        ]);
        k
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn public(&self, key: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{key}.pub")))
            .unwrap()
            .trim()
            .to_string()
    }

    /// `SHA256:...` as `ssh-keygen -l` prints it.
    pub fn fingerprint(&self, key: &str) -> String {
        let out = Command::new("ssh-keygen")
            .args(["-l", "-E", "sha256", "-f"])
            .arg(self.path(&format!("{key}.pub")))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string()
    }

    pub fn config(&self) -> PathBuf {
        self.path("settle.toml")
    }

    /// Writes the config with these (operator, role, key) and nothing else.
    pub fn write_config(&self, operators: &[(&str, &str, &str)]) {
        self.write_config_with(operators, "");
    }

    /// Writes the config with these (operator, role, key) after the `extra` lines.
    pub fn write_config_with(&self, operators: &[(&str, &str, &str)], extra: &str) {
        let mut text = format!("log_file = \"/dev/null\"\n{extra}\n");
        for (name, role, key) in operators {
            text.push_str(&format!(
                "[operators.{name}]\nrole = \"{role}\"\nkeys = [\"{}\"]\n",
                self.public(key)
            ));
        }
        // written whole: the server watches the file
        let tmp = self.path("settle.toml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, self.config()).unwrap();
    }
}

/// `ssh`'s options for the test server on `port`: batch mode, the host key unchecked.
pub fn ssh_options(port: u16) -> Vec<String> {
    [
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=10",
        "-p",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([port.to_string()])
    .collect()
}
