//! A private `redis-server` on a free loopback port that can be rolled back like a failover to a
//! replica missing the last writes: `SAVE` takes the checkpoint, `DEBUG RELOAD NOSAVE` loads it
//! again (every key, the provider's version sequence included). Destructive, so never the
//! shared test Redis; the server is killed when dropped.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A private Redis server (see the module docs).
pub(crate) struct PrivateRedis {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl PrivateRedis {
    /// Starts one, waiting (bounded) until it answers; `None` if it cannot be started.
    pub(crate) async fn start() -> Option<PrivateRedis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let dir =
            std::env::temp_dir().join(format!("zlink-rollback-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--enable-debug-command", "yes"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let server = PrivateRedis { child, port, dir };
        for _ in 0..100 {
            if server.cli(&["PING"]).is_some_and(|o| o.trim() == "PONG") {
                return Some(server);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// The server's URL.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Takes the checkpoint (the one a later [`roll_back`](Self::roll_back) returns to).
    pub(crate) fn checkpoint(&self) {
        let out = self.cli(&["SAVE"]).unwrap_or_default();
        assert_eq!(out.trim(), "OK", "SAVE");
    }

    /// Makes the server what it was at the last checkpoint.
    pub(crate) fn roll_back(&self) {
        let out = self.cli(&["DEBUG", "RELOAD", "NOSAVE"]).unwrap_or_default();
        assert_eq!(out.trim(), "OK", "DEBUG RELOAD NOSAVE");
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
