//! End-to-end against real env server processes (the `noop` env of `envs/`), over both
//! transports: episode lifecycle, batched steps, a killed server, a restarted one.
//!
//! Skipped (with a note on stderr) when Python or the server's dependencies are missing.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentgym_envpool::{EnvPool, EnvPoolError, FailureKind, PoolConfig, ServerConfig};

fn envs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../envs")
}

fn python_ok() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import uvicorn, zmq, msgpack, agentgym_envs"])
        .current_dir(envs_dir())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping: python3 with uvicorn/pyzmq/msgpack and envs/ not available");
    }
    ok
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct ServerProc(Child);

impl ServerProc {
    fn start(http: u16, zmq: u16) -> Self {
        let child = Command::new("python3")
            .args(["-m", "agentgym_envs.server", "noop"])
            .args(["--port", &http.to_string(), "--zmq-port", &zmq.to_string()])
            .current_dir(envs_dir())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        ServerProc(child)
    }

    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn pool(addresses: &[String]) -> EnvPool {
    let servers = addresses
        .iter()
        .map(|a| ServerConfig::new("noop", a.clone()))
        .collect();
    let mut config = PoolConfig::new(servers);
    config.health_interval = Duration::from_millis(100);
    config.timeouts.step = Duration::from_secs(5);
    EnvPool::new(config).unwrap()
}

/// Wait until every server answers a health check.
fn wait_up(pool: &EnvPool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let handle = pool.handle().unwrap().clone();
    loop {
        handle.block_on(pool.check_health()).unwrap();
        if pool.servers().iter().all(|s| s.up) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "servers not up: {:?}",
            pool.servers()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn lifecycle_batch_kill_and_restart_over_both_transports() {
    if !python_ok() {
        return;
    }
    let (h1, z1, h2, z2) = (free_port(), free_port(), free_port(), free_port());
    let mut s1 = ServerProc::start(h1, z1);
    let _s2 = ServerProc::start(h2, z2);
    for addresses in [
        vec![
            format!("http://127.0.0.1:{h1}"),
            format!("http://127.0.0.1:{h2}"),
        ],
        vec![
            format!("tcp://127.0.0.1:{z1}"),
            format!("tcp://127.0.0.1:{z2}"),
        ],
    ] {
        if s1.0.try_wait().unwrap().is_some() {
            s1 = ServerProc::start(h1, z1);
        }
        let pool = pool(&addresses);
        wait_up(&pool);
        let rt = pool.handle().unwrap().clone();
        rt.block_on(async {
            // Lifecycle and placement: 4 episodes spread 2/2 over the servers.
            let mut eps = Vec::new();
            for i in 0..4 {
                let c = pool.create("noop").await.unwrap();
                let r = pool.reset(c.episode, i).await.unwrap();
                assert_eq!(r.observation, format!("task {i}"));
                eps.push(c);
            }
            assert!(pool.servers().iter().all(|s| s.live_episodes == 2));
            let o = pool.step(eps[0].episode, "noop").await.unwrap();
            assert_eq!((o.observation.as_str(), o.done), ("ok", false));
            assert_eq!(pool.observation(eps[0].episode).await.unwrap(), "ok");
            // Batched steps, one unknown handle among them.
            let mut items: Vec<(u64, String)> =
                eps.iter().map(|c| (c.episode, "stop".to_owned())).collect();
            items.push((999, "noop".into()));
            let results = pool.step_many(items).await;
            assert!(results[..4].iter().all(|r| r.as_ref().unwrap().done));
            assert!(matches!(results[4], Err(EnvPoolError::UnknownEpisode(999))));
            // Step after done: refused, the episode stays live.
            let refused = pool.step(eps[0].episode, "noop").await;
            assert!(
                matches!(refused, Err(EnvPoolError::Refused { .. })),
                "{refused:?}"
            );
            for c in &eps {
                pool.close(c.episode).await.unwrap();
            }
            assert_eq!(pool.live_episodes(), 0);

            // Kill server 1 with an episode on it: that episode fails, server 2 keeps serving.
            let on1 = pool.create("noop").await.unwrap();
            let on2 = pool.create("noop").await.unwrap();
            let (on1, on2) = if on1.server == addresses[0] {
                (on1, on2)
            } else {
                (on2, on1)
            };
            pool.reset(on1.episode, 0).await.unwrap();
            pool.reset(on2.episode, 0).await.unwrap();
            s1.kill();
            let err = pool.step(on1.episode, "noop").await.unwrap_err();
            assert!(
                matches!(
                    err,
                    EnvPoolError::EnvFailure {
                        kind: FailureKind::Disconnected,
                        ..
                    }
                ),
                "{err:?}"
            );
            pool.step(on2.episode, "noop").await.unwrap();
            pool.check_health().await.unwrap();
            for _ in 0..3 {
                let c = pool.create("noop").await.unwrap();
                assert_eq!(c.server, addresses[1]);
                pool.close(c.episode).await.unwrap();
            }
            pool.close(on2.episode).await.unwrap();
        });
        // Restart on the same ports: the same pool uses it again.
        s1 = ServerProc::start(h1, z1);
        wait_up(&pool);
        rt.block_on(async {
            let mut seen = std::collections::HashSet::new();
            for _ in 0..4 {
                let c = pool.create("noop").await.unwrap();
                pool.reset(c.episode, 1).await.unwrap();
                pool.step(c.episode, "noop").await.unwrap();
                seen.insert(c.server.clone());
            }
            assert!(seen.contains(&addresses[0]), "{seen:?}");
            pool.shutdown().await;
        });
        assert_eq!(pool.live_episodes(), 0);
    }
}
