//! The request loads the figures measure: Actor requests by id, node-direct requests, and
//! the tokio `mpsc` + `oneshot` floor.

use super::*;

/// `c` tasks request `Echo` of the Actors in `targets` (task j: targets j, j+c, …, wrapping)
/// for `d`; every request's latency.
pub(crate) async fn actor_load(
    actors: &ActorManager,
    targets: &Arc<Vec<String>>,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(c);
    for j in 0..c {
        let (actors, targets) = (actors.clone(), Arc::clone(targets));
        tasks.push(tokio::spawn(async move {
            let echo = echo();
            let mut samples = Vec::new();
            let mut k = j % targets.len();
            while started.elapsed() < d {
                let id = &targets[k];
                let t = Instant::now();
                let reply = actors
                    .request(id, &echo)
                    .await
                    .map_err(|e| format!("request {id}: {e}"))?;
                samples.push(t.elapsed());
                if reply.len() != PAYLOAD {
                    return Err("wrong echo".to_owned());
                }
                k = (k + c) % targets.len();
            }
            Ok::<_, String>(samples)
        }));
    }
    collect(tasks, started).await
}

/// `c` tasks request the node-direct `Echo` of `target` for `d`.
pub(super) async fn node_load(
    node: &MeshNode,
    target: &RoutingId,
    c: usize,
    d: Duration,
) -> Result<(Vec<Duration>, Duration), String> {
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(c);
    for _ in 0..c {
        let (node, target) = (node.clone(), target.clone());
        tasks.push(tokio::spawn(async move {
            let echo = echo();
            let mut samples = Vec::new();
            while started.elapsed() < d {
                let t = Instant::now();
                let reply = node.request(&target, &echo).await.map_err(to_string)?;
                samples.push(t.elapsed());
                if reply.len() != PAYLOAD {
                    return Err("wrong echo".to_owned());
                }
            }
            Ok::<_, String>(samples)
        }));
    }
    collect(tasks, started).await
}

/// One task sends `Echo` over a tokio `mpsc` channel with a `oneshot` for the reply to a task
/// that answers with its bytes, one at a time, for `d`.
pub(super) async fn mpsc_load(d: Duration) -> Result<(Vec<Duration>, Duration), String> {
    type Job = (Echo, tokio::sync::oneshot::Sender<String>);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Job>(1024);
    let answering = tokio::spawn(async move {
        while let Some((e, reply)) = rx.recv().await {
            let _ = reply.send(e.bytes);
        }
    });
    let started = Instant::now();
    let task = tokio::spawn(async move {
        let echo = echo();
        let mut samples = Vec::new();
        while started.elapsed() < d {
            let t = Instant::now();
            let (reply_tx, reply_rx) = tokio::sync::oneshot::channel();
            tx.send((echo.clone(), reply_tx))
                .await
                .map_err(|_| "the answering task is gone")?;
            let reply = reply_rx.await.map_err(|_| "no answer")?;
            samples.push(t.elapsed());
            if reply.len() != PAYLOAD {
                return Err("wrong echo".to_owned());
            }
        }
        Ok::<_, String>(samples)
    });
    let out = collect(vec![task], started).await;
    answering.await.map_err(to_string)?;
    out
}

async fn collect(
    tasks: Vec<tokio::task::JoinHandle<Result<Vec<Duration>, String>>>,
    started: Instant,
) -> Result<(Vec<Duration>, Duration), String> {
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(to_string)??);
    }
    Ok((all, started.elapsed()))
}
