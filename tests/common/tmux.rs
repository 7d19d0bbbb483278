//! A tmux server of a test's own: a real terminal for the real binary (keys in, screens out).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A tmux server of the test's own, so parallel tests and the user's tmux never meet.
pub struct Tmux {
    pub socket: String,
    pub dir: tempfile::TempDir,
}

impl Tmux {
    pub fn new(name: &str) -> Tmux {
        let socket = format!(
            "settle-{name}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        );
        Tmux {
            socket,
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("tmux");
        String::from_utf8_lossy(&out.stdout).into()
    }

    /// Opens window `window` of `size` running a shell, and types `cmd` into it (so that after
    /// the program ends, the screen is the shell's again).
    pub fn shell(&self, window: &str, size: (u16, u16), cmd: &str) {
        let (cols, rows) = (size.0.to_string(), size.1.to_string());
        let started = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(["has-session", "-t", "t"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !started {
            self.run(&[
                "new-session",
                "-d",
                "-s",
                "t",
                "-n",
                window,
                "-x",
                &cols,
                "-y",
                &rows,
                "sh",
            ]);
        } else {
            self.run(&["new-window", "-t", "t", "-n", window, "sh"]);
            self.run(&[
                "resize-window",
                "-t",
                &format!("t:{window}"),
                "-x",
                &cols,
                "-y",
                &rows,
            ]);
        }
        self.run(&["send-keys", "-t", &format!("t:{window}"), cmd, "Enter"]);
    }

    pub fn keys(&self, window: &str, keys: &[&str]) {
        for k in keys {
            self.run(&["send-keys", "-t", &format!("t:{window}"), k]);
            std::thread::sleep(Duration::from_millis(60));
        }
    }

    pub fn literal(&self, window: &str, text: &str) {
        self.run(&["send-keys", "-t", &format!("t:{window}"), "-l", text]);
        std::thread::sleep(Duration::from_millis(100));
    }

    pub fn screen(&self, window: &str) -> String {
        self.run(&["capture-pane", "-p", "-t", &format!("t:{window}")])
    }

    /// The screen with its attributes as escape sequences (bold, underline, colours).
    pub fn styled(&self, window: &str) -> String {
        self.run(&["capture-pane", "-p", "-e", "-t", &format!("t:{window}")])
    }

    /// Waits until the screen satisfies `ok` (giving up after 20 s).
    pub fn wait(&self, window: &str, what: &str, ok: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.screen(window);
            if ok(&s) {
                return;
            }
            if Instant::now() > deadline {
                panic!("waited for {what}; the screen is:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
}
