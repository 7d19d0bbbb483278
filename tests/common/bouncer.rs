//! A real PgBouncer in transaction pooling mode in front of the tests' PostgreSQL server, as
//! teams run one (manual: Retention and the archive): a process of its own on a port of its own, stopped when its guard
//! drops. It hands each transaction the next server connection in turn (`server_round_robin`),
//! so a statement that outlives its transaction, or a session setting, breaks at once rather
//! than now and then. Its ini is otherwise as shipped: no `ignore_startup_parameters`.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, running_as_root};

pub struct Bouncer {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Bouncer {
    /// Starts a PgBouncer that reaches the server `admin` (a `postgres://USER@HOST:PORT/DB`
    /// URL) for any database, trusting USER.
    pub fn start(admin: &str) -> Bouncer {
        let (user, host, port) = server_of(admin);
        let dir = tempfile::tempdir().unwrap();
        let listen = free_port();
        let ini = dir.path().join("pgbouncer.ini");
        let users = dir.path().join("users.txt");
        std::fs::write(&users, format!("\"{user}\" \"\"\n")).unwrap();
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={port}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\n\
                 unix_socket_dir =\nauth_type = trust\nauth_file = {}\n\
                 pool_mode = transaction\nserver_round_robin = 1\n\
                 default_pool_size = 6\nmax_client_conn = 2000\n",
                users.display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new("pgbouncer");
        // PgBouncer will not run as root: as root, it runs as the server's own user
        if running_as_root() {
            use std::os::unix::fs::PermissionsExt;
            for p in [dir.path(), &ini, &users] {
                let mode = if p.is_dir() { 0o755 } else { 0o644 };
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
            }
            cmd.args(["-u", "postgres"]);
        }
        let child = cmd
            .arg(&ini)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer (apt-get install pgbouncer)");
        let mut bouncer = Bouncer {
            child,
            port: listen,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", listen)).is_err() {
            if let Ok(Some(status)) = bouncer.child.try_wait() {
                panic!("pgbouncer exited at start: {status}");
            }
            assert!(Instant::now() < deadline, "pgbouncer did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        bouncer
    }

    /// `url` (on the server behind) as reached through this PgBouncer, with settle told so.
    pub fn url_for(&self, url: &str) -> String {
        let (user, _, _) = server_of(url);
        let db = url.rsplit_once('/').unwrap().1;
        format!(
            "postgres://{user}@127.0.0.1:{}/{db}?pgbouncer=true",
            self.port
        )
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The user, host and port of a `postgres://USER@HOST:PORT/DB` URL.
fn server_of(url: &str) -> (String, String, u16) {
    let rest = url.split_once("://").unwrap().1;
    let authority = rest.split('/').next().unwrap();
    let (user, hostport) = authority
        .rsplit_once('@')
        .unwrap_or(("postgres", authority));
    let user = user.split(':').next().unwrap().to_string();
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
    (user, host.to_string(), port.parse().unwrap())
}
