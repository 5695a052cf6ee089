//! The load a command puts on its target, read from `shrike run`'s flags: each flag is a typed
//! edit over an optional `--spec` file's options (or the defaults), built into one [`RunSpec`],
//! with the built-in server started when nothing names a target. `run` runs it once; commands
//! that run a series of trials (capacity search, sweeps) vary it through the planners'
//! `trial_spec`, and every error reads in the words the user gave it: flags, or the spec
//! file's fields.

use std::path::{Path, PathBuf};

use serde_json::Value;
use shrike_engine::{RunSpec, SpecError};
use shrike_spec::{names, Opt, SpecEdit};

use crate::args::usage;
use crate::embedded::EmbeddedServer;
use crate::run::RunArgs;

/// A validated load, with the built-in server it targets (if any) kept running.
pub(crate) struct LoadSpec {
    pub spec: RunSpec,
    /// The server started because nothing named a target; stops when this is dropped.
    pub server: Option<EmbeddedServer>,
    /// The options the command line set (the rest came from the spec file, or are defaults).
    flags: Vec<Opt>,
    file: Option<PathBuf>,
}

impl LoadSpec {
    /// The load `args` describe, exactly as `shrike run` would run it.
    pub fn from_args(args: &RunArgs) -> anyhow::Result<LoadSpec> {
        LoadSpec::with(args, |e| e)
    }

    /// The load `args` describe, with `planned` (what a planner's trials all do to it, such as
    /// running unpaced) applied before it is checked, so rules that hold only for the trials'
    /// load (`--read-coalesce` needs an unpaced run) are checked against it.
    pub fn with(
        args: &RunArgs,
        planned: impl FnOnce(SpecEdit) -> SpecEdit,
    ) -> anyhow::Result<LoadSpec> {
        let file = args.spec.clone();
        let base = match &file {
            Some(path) => SpecEdit::from_json(&read_spec_file(path)?)
                .map_err(|e| explain(e, &[], Some(path)))?,
            None => SpecEdit::new(),
        };
        let mut edit = planned(args.edit(base)?);
        // The built-in server: when nothing names a target, or a spec recorded a run against
        // it (whose port is gone) and no URL replaces it.
        let built_in = edit.targets_built_in_server() && args.url.is_none();
        let server = if (!edit.has_target() || built_in) && args.dry_run {
            // A dry run starts nothing: it names where the built-in server would be.
            edit = edit.built_in_server(crate::dry_run::BUILT_IN);
            None
        } else if !edit.has_target() || built_in {
            let server = EmbeddedServer::start()?;
            edit = edit.built_in_server(&format!("http://{}/", server.addr));
            Some(server)
        } else {
            None
        };
        let flags = edit.touched().to_vec();
        let spec = edit.build().map_err(|e| explain(e, &flags, file.as_deref()))?;
        spec.refuse_misplaced(&flags).map_err(|e| explain(e, &flags, file.as_deref()))?;
        Ok(LoadSpec { spec, server, flags, file })
    }

    /// A spec error in the words of the command line: flags, or the spec file's fields.
    pub fn explain(&self, e: SpecError) -> anyhow::Error {
        explain(e, &self.flags, self.file.as_deref())
    }
}

/// A spec error for the command line: the option and every other it mentions named by their
/// flags, unless the option came from the spec file, which is then named with its fields.
fn explain(e: SpecError, flags: &[Opt], file: Option<&Path>) -> anyhow::Error {
    let in_flag = |o: &Opt| e.field == o.name || e.field.starts_with(&format!("{}.", o.name));
    let from_flags = file.is_none() || flags.iter().any(in_flag);
    match file {
        Some(f) if !from_flags => usage(format!("{}: {e}", f.display())),
        _ => usage(e.render(&names::flag_for)),
    }
}

/// The stored result `--spec` names, when it is a planner's document holding `key`
/// (`capacity`, `sweep`): what its search or grid was, for the flags not given. A file that
/// cannot be read is not one (loading the spec reports it).
pub fn stored_plan(args: &crate::run::RunArgs, key: &str) -> Option<Value> {
    let text = std::fs::read_to_string(args.spec.as_ref()?).ok()?;
    serde_json::from_str::<Value>(&text).ok().filter(|d| d.get(key).is_some())
}

/// The options of `path`: a spec (a JSON object of options) or a stored result's `options`.
/// A stored result's run is over: running its options again is a new run, with an id of its
/// own and no start time in the past.
fn read_spec_file(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--spec: cannot read {}: {e}", path.display())))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("--spec: {} is not JSON: {e}", path.display())))?;
    // A run's result, a capacity search's or a sweep's: each records the load it ran.
    let stored = v
        .get("options")
        .filter(|_| ["results", "capacity", "sweep"].iter().any(|k| v.get(k).is_some()));
    match stored.unwrap_or(&v) {
        Value::Object(o) if stored.is_some() => {
            let mut o = o.clone();
            for key in [names::EXECUTION_ID, names::START_AT, names::SCHEDULED_START] {
                o.remove(key.key());
            }
            // What a merge of some shards says of itself: no option of a run.
            o.remove("partial");
            Ok(Value::Object(o))
        }
        o @ Value::Object(_) => Ok(o.clone()),
        _ => Err(usage(format!("--spec: {} holds no JSON object of options", path.display()))),
    }
}
