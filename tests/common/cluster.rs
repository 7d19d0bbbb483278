//! A PostgreSQL cluster of a test's own (`initdb` and `pg_ctl` as the `postgres` user, on a port
//! and a directory of its own), for what must never touch the shared server: a replica, a
//! restart. Stopped (immediately) and removed when the guard drops.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{free_port, running_as_root};

const BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct Cluster {
    pub port: u16,
    data: PathBuf,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// A new primary that also takes replication connections from 127.0.0.1.
    pub fn primary() -> Cluster {
        Cluster::primary_with("")
    }

    /// [`Cluster::primary`] with these lines added to its `postgresql.conf` (its standbys copy
    /// them).
    pub fn primary_with(conf: &str) -> Cluster {
        let dir = owned_dir();
        let data = dir.path().join("data");
        as_postgres(
            &format!("{BIN}/initdb"),
            &["-D", s(&data), "-A", "trust", "-U", "postgres"],
        );
        let hba = data.join("pg_hba.conf");
        let mut text = std::fs::read_to_string(&hba).unwrap();
        text.push_str("host replication all 127.0.0.1/32 trust\n");
        std::fs::write(&hba, text).unwrap();
        let conf_file = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_file).unwrap();
        text.push_str(conf);
        std::fs::write(&conf_file, text).unwrap();
        Cluster::started(dir, data)
    }

    /// A hot standby of this cluster, streaming from it.
    pub fn standby(&self) -> Cluster {
        let dir = owned_dir();
        let data = dir.path().join("data");
        let port = self.port.to_string();
        as_postgres(
            &format!("{BIN}/pg_basebackup"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                s(&data),
                "-R",
            ],
        );
        Cluster::started(dir, data)
    }

    fn started(dir: tempfile::TempDir, data: PathBuf) -> Cluster {
        let cluster = Cluster {
            port: free_port(),
            data,
            dir,
        };
        cluster.start();
        cluster
    }

    pub fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log");
        as_postgres(
            &format!("{BIN}/pg_ctl"),
            &[
                "-D",
                s(&self.data),
                "-o",
                &opts,
                "-l",
                s(&log),
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server (`fast`: clients told; `immediate`: a crash, recovered from the WAL at
    /// start) and starts it again on the same port.
    pub fn restart(&self, mode: &str) {
        self.stop(mode);
        self.start();
    }

    /// Stops the server (`immediate`: as a crash, or a machine that is gone).
    pub fn stop(&self, mode: &str) {
        as_postgres(
            &format!("{BIN}/pg_ctl"),
            &["-D", s(&self.data), "-m", mode, "-w", "stop"],
        );
    }

    /// Promotes this standby to a primary, and waits until it takes writes.
    pub fn promote(&self) {
        as_postgres(
            &format!("{BIN}/pg_ctl"),
            &["-D", s(&self.data), "-w", "promote"],
        );
    }

    /// A primary whose commits wait until its standby has them (`synchronous_standby_names`),
    /// and that standby, streaming.
    pub fn synchronous_pair() -> (Cluster, Cluster) {
        let primary = Cluster::primary();
        let standby = primary.standby();
        // set after the base backup, so that the standby (once promoted) waits for no one
        primary.sql("ALTER SYSTEM SET synchronous_standby_names = '*'");
        primary.sql("SELECT pg_reload_conf()");
        super::wait_until(
            "the standby streams synchronously",
            std::time::Duration::from_secs(30),
            || primary.sql("SELECT string_agg(sync_state, ',') FROM pg_stat_replication") == "sync",
        );
        (primary, standby)
    }

    /// Cuts every client's connection (`pg_terminate_backend`), as a failover or a network
    /// blip does; the server stays up.
    pub fn cut_connections(&self) {
        self.sql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
        );
    }

    /// Runs `sql` in database `postgres` as `postgres`: what it printed, trimmed.
    pub fn sql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-qAt",
                "-p",
            ])
            .arg(self.port.to_string())
            .arg("-c")
            .arg(sql)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The URL of database `db` on this cluster.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = command(
            &format!("{BIN}/pg_ctl"),
            &["-D", s(&self.data), "-m", "immediate", "stop"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A temporary directory the `postgres` user may write to.
fn owned_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if running_as_root() {
        let status = Command::new("chown")
            .arg("postgres")
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "chown postgres");
    }
    dir
}

/// `program args` as the `postgres` user when run as root (PostgreSQL will not run as root).
fn command(program: &str, args: &[&str]) -> Command {
    let mut c = match running_as_root() {
        true => {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", program]);
            c
        }
        false => Command::new(program),
    };
    c.args(args).current_dir("/");
    c
}

fn as_postgres(program: &str, args: &[&str]) {
    let out = command(program, args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
