//! Ctrl-C and SIGTERM for commands that run the engine, once (`run`) or trial after trial
//! (`capacity`, `sweep`). The first signal stops the trial in progress, which drains its
//! in-flight requests (up to `--timeout`) so its result is still written, and tells the command
//! to run no more; a second one exits at once, without a result.
//!
//! While a run is prepared (hosts resolved, files read: see [`Interrupts::preparing`]) nothing
//! has been measured yet, and a resolver that never answers would hold the process for its
//! whole timeout: a signal then exits at once.
//!
//! The servers (`serve`, `service`) take their signals as a stream instead ([`Signals`]):
//! the first drains, the second exits.
//!
//! A command with a gentler first stop (replay: start no new job, let the running ones end)
//! sets it with [`Interrupts::soften`]; then the second signal stops the run as the first
//! would have, and only the third exits at once.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use shrike_engine::{EngineError, Ready, RunError, StopHandle};
use shrike_stats::{RunResult, Termination};
use tokio::sync::oneshot;

use crate::log::{self, Tag};

#[derive(Default)]
struct State {
    /// The trial running now, if any.
    current: Option<StopHandle>,
    signals: u32,
    /// How long a stopped trial's in-flight requests get (`--timeout`), for the message.
    grace: Duration,
    /// The gentler first stop, and what the message says it does.
    soft: Option<(Box<dyn Fn() + Send>, String)>,
    /// A run is being prepared: a signal has nothing to keep, and need not wait.
    preparing: bool,
    /// Trials started so far (a command's first has nothing before it to keep).
    trials: u32,
}

/// Watches for SIGINT and SIGTERM from creation until the process ends.
#[derive(Clone)]
pub(crate) struct Interrupts {
    state: Arc<Mutex<State>>,
}

impl Interrupts {
    /// Registers the handlers (before any trial starts, so an early Ctrl-C is not lost).
    /// `grace` is what the first signal's message promises: how long in-flight requests get.
    pub fn install(grace: Duration) -> Result<Interrupts, RunError> {
        let state = Arc::new(Mutex::new(State { grace, ..State::default() }));
        let watched = state.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("shrike-signals".into())
            .spawn(move || watch(watched, ready_tx))
            .map_err(|e| RunError::Engine(EngineError::Spawn(e)))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Interrupts { state }),
            Ok(Err(e)) => Err(RunError::Engine(EngineError::Runtime(e))),
            Err(_) => Err(RunError::Engine(EngineError::Crashed)),
        }
    }

    /// Sets the grace the first signal's message promises, once the load (and its
    /// `--timeout`) is known: a sweep installs the handlers before starting its servers.
    pub fn set_grace(&self, grace: Duration) {
        lock(&self.state).grace = grace;
    }

    /// Makes the first signal call `stop` (saying `what` it does) instead of stopping the run.
    pub fn soften(&self, stop: impl Fn() + Send + 'static, what: &str) {
        lock(&self.state).soft = Some((Box::new(stop), what.to_string()));
    }

    /// Runs `prepare` (resolving hosts, reading request files) with a signal exiting at once
    /// when no trial ran before it: there is nothing measured to write, and name resolution
    /// cannot be cut short otherwise.
    pub fn preparing<T>(&self, prepare: impl FnOnce() -> T) -> T {
        lock(&self.state).preparing = true;
        let out = prepare();
        lock(&self.state).preparing = false;
        out
    }

    /// Whether a signal has asked the command to stop.
    pub fn interrupted(&self) -> bool {
        lock(&self.state).signals > 0
    }

    /// Runs one trial; a signal stops it (and one that came before it stops it at once, so a
    /// series of trials ends without starting another full one).
    pub fn execute(&self, ready: Ready) -> Result<RunResult, RunError> {
        self.execute_with(|stop| ready.execute(stop))
    }

    /// [`Interrupts::execute`] for any run that takes a stop handle (a coordinated one).
    pub fn execute_with<T>(&self, run: impl FnOnce(&StopHandle) -> T) -> T {
        let stop = StopHandle::new();
        {
            let mut st = lock(&self.state);
            // A soft first stop (already applied by its hook) does not stop the run itself.
            if st.signals > u32::from(st.soft.is_some()) {
                stop.request(Termination::Interrupted);
            }
            st.current = Some(stop.clone());
            st.trials += 1;
        }
        let out = run(&stop);
        lock(&self.state).current = None;
        out
    }
}

/// A poisoned lock only means a panic elsewhere while holding it; the state is still usable.
/// The exit status of a command a signal stopped: 130 for SIGINT (Ctrl-C), 143 for SIGTERM,
/// as shells report them; 0 until a signal came.
static EXIT_STATUS: AtomicU8 = AtomicU8::new(0);
const INTERRUPTED: u8 = 130;
const TERMINATED: u8 = 143;

/// The exit status an interrupted command ends with: by the first signal that came (130 for
/// SIGINT, 143 for SIGTERM); 130 for one stopped otherwise (a cancel).
pub fn status() -> u8 {
    match EXIT_STATUS.load(Ordering::Relaxed) {
        0 => INTERRUPTED,
        s => s,
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn watch(state: Arc<Mutex<State>>, ready: std::sync::mpsc::Sender<std::io::Result<()>>) {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    rt.block_on(async move {
        let (mut sigint, mut sigterm) =
            match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
                (Ok(i), Ok(t)) => (i, t),
                (Err(e), _) | (_, Err(e)) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
        let _ = ready.send(Ok(()));
        loop {
            let terminated = tokio::select! {
                _ = sigint.recv() => false,
                _ = sigterm.recv() => true,
            };
            // The first signal names the exit status, as a shell reports a process it ended:
            // 128 + SIGINT's 2, or + SIGTERM's 15 (a supervisor's stop).
            let _ = EXIT_STATUS.compare_exchange(
                0,
                if terminated { TERMINATED } else { INTERRUPTED },
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            let mut st = lock(&state);
            st.signals += 1;
            if st.preparing && st.trials == 0 {
                log::line(
                    Tag::Warning,
                    "interrupted before the load started (while resolving hosts and reading \
                     files): nothing was measured, exiting",
                );
                shrike_plan::sweep::server::stop_all_started();
                std::process::exit(i32::from(status()));
            }
            if st.signals == 1 {
                if let Some((stop, what)) = &st.soft {
                    stop();
                    log::line(
                        Tag::Warning,
                        &format!("interrupted: {what}; interrupt again to stop now (the result is still written)"),
                    );
                    continue;
                }
            }
            let hard = if st.soft.is_some() { 2 } else { 1 };
            if st.signals > hard {
                log::line(Tag::Warning, "interrupted twice: exiting without a result");
                // Exiting skips destructors: stop the servers a sweep started here, or they
                // would outlive it in their own process groups.
                shrike_plan::sweep::server::stop_all_started();
                std::process::exit(i32::from(status()));
            }
            let message = match &st.current {
                Some(stop) => {
                    stop.request(Termination::Interrupted);
                    format!(
                        "interrupted: finishing in-flight requests (up to {}s) and writing the \
                         result; interrupt again to exit immediately",
                        st.grace.as_secs_f64()
                    )
                }
                None => "interrupted: stopping; interrupt again to exit immediately".into(),
            };
            log::line(Tag::Warning, &message);
        }
    });
}

/// The planners' trials stop as `run`'s run does: the first signal stops the trial in progress
/// (its result is kept) and starts no other.
impl shrike_plan::trial::Stopper for Interrupts {
    fn stopped(&self) -> bool {
        self.interrupted()
    }

    fn preparing(&self, now: bool) {
        lock(&self.state).preparing = now;
    }

    fn run(
        &self,
        trial: &mut dyn FnMut(&StopHandle) -> Result<RunResult, String>,
    ) -> Result<RunResult, String> {
        self.execute_with(|stop| trial(stop))
    }
}

/// SIGINT and SIGTERM as one stream, for the servers (`serve`, `service`): they stop on a
/// shutdown future, where commands that run the engine stop through [`Interrupts`].
pub(crate) struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn install() -> anyhow::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                interrupt: signal(SignalKind::interrupt()).context("cannot handle SIGINT")?,
                terminate: signal(SignalKind::terminate()).context("cannot handle SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// The first signal resolves the returned future (a graceful stop: `first` says what it
    /// does), the second the receiver (exit at once: `second`).
    pub(crate) fn two_phase(
        mut self,
        first: &'static str,
        second: &'static str,
    ) -> (impl std::future::Future<Output = ()> + Send, oneshot::Receiver<()>) {
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (force_tx, force_rx) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let signal = self.recv().await;
            crate::log::info!("{signal}: {first} (signal again to exit at once)");
            let _ = stop_tx.send(());
            let signal = self.recv().await;
            crate::log::info!("{signal}: {second}");
            let _ = force_tx.send(());
        });
        (
            async {
                let _ = stop_rx.await;
            },
            force_rx,
        )
    }

    /// Waits for the next signal and names it.
    pub(crate) async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}
