//! The server under test: the real app on 127.0.0.1:0 with a fresh data directory, serving the
//! built-in `offshore-emergency` study with every robot action shortened to a couple of seconds
//! (the dialogue, options, guards, media and survey are the study's own).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wozkit_core::event::Event;
use wozkit_core::load::{LoadedStudy, load_builtin};
use wozkit_core::model::Duration as ActionDuration;
use wozkit_server::{Config, StartError, Tunables, launch_with_listener};
use wozkit_store::{Platform, Store};

pub const STUDY: &str = "offshore-emergency";
/// How long every robot action takes in the test, in seconds.
pub const ACTION_S: f64 = 2.0;

/// The built-in study with short robot actions.
pub fn quick_study() -> Result<LoadedStudy> {
    let mut study = load_builtin(STUDY).map_err(|e| anyhow!("{STUDY} does not load:\n{e}"))?;
    // One variant of the emergency, the study's defaults (the fire in the east tower, every
    // robot in service), so the tests know where to send the robots; no travel time.
    wozkit_core::scenario::pin_defaults(&mut study.study);
    for action in &mut study.study.actions {
        action.duration = ActionDuration {
            default: ACTION_S,
            by_kind: Default::default(),
        };
        action.progress_every_s = 0.5;
    }
    Ok(study)
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub store: Arc<dyn Store>,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<Result<(), StartError>>>,
    /// The data directory; removed when the test ends.
    _data: tempfile::TempDir,
}

impl TestServer {
    pub async fn start(study: LoadedStudy) -> Result<TestServer> {
        TestServer::start_all(vec![study]).await
    }

    /// The server with several studies (an entry link names one with `study=`).
    pub async fn start_all(studies: Vec<LoadedStudy>) -> Result<TestServer> {
        TestServer::start_tuned(studies, TestServer::tunables()).await
    }

    /// The timings every browser test runs with: a waiting room that updates twice a second
    /// and a room that lingers 2 s after its end.
    pub fn tunables() -> Tunables {
        Tunables {
            waiting_update_ms: 500,
            room_linger_ms: 2000,
            ..Tunables::default()
        }
    }

    /// The server with `studies` and `tunables` (e.g. [`TestServer::tunables`] with a trusted
    /// proxy).
    pub async fn start_tuned(studies: Vec<LoadedStudy>, tunables: Tunables) -> Result<TestServer> {
        let data = tempfile::tempdir().context("data dir")?;
        let location = data.path().to_str().context("utf-8 temp path")?;
        let store = wozkit_store::open(location)
            .await
            .map_err(|e| anyhow!("store does not open: {e}"))?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let config = Config { studies, tunables };
        let handle = tokio::spawn(launch_with_listener(
            config,
            store.clone(),
            listener,
            async {
                let _ = stopped.await;
            },
        ));
        Ok(TestServer {
            addr,
            store,
            stop: Some(stop),
            handle: Some(handle),
            _data: data,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The event log of the session that `worker` (on `platform`) joined in `study`.
    pub async fn session_events(
        &self,
        study: &str,
        platform: Platform,
        worker: &str,
    ) -> Result<Vec<Event>> {
        let part = self
            .store
            .participant_by_worker(study, platform, worker)
            .await
            .map_err(|e| anyhow!("store: {e}"))?
            .with_context(|| {
                format!(
                    "no participant {worker} on {} in {study}",
                    platform.as_str()
                )
            })?;
        let session = part
            .session_id
            .with_context(|| format!("{worker} has no session in {study}"))?;
        self.store
            .events(&session, 0)
            .await
            .map_err(|e| anyhow!("store: {e}"))
    }

    /// Stops the server and waits until it has closed the store.
    pub async fn stop(&mut self) -> Result<()> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.handle.take() {
            tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .context("the server did not stop within 10 s")?
                .context("the server task panicked")?
                .map_err(|e| anyhow!("the server stopped with an error: {e}"))?;
        }
        Ok(())
    }
}
