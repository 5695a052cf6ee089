//! The search: which trial to run next, and what the trials so far say.
//!
//! MLRsearch's shape (draft-ietf-bmwg-mlrsearch): short trials while narrowing, a full-length
//! confirmation at the end, and each load decided by its trials together rather than by any
//! one of them, so one trial a noisy host stalled neither fails a load nor passes it on its
//! own. An exponential ramp from the start level doubles until some goal fails, then
//! bisection narrows every goal's [highest pass, lowest fail] to the precision; trials are
//! shared, so one trial judges every goal, and the lowest level any goal needs goes first.
//!
//! A level's verdict comes from every trial at it (a confirmation is one more vote): passes
//! alone pass it; a failure is repeated until failures outnumber passes `1 + repeats` times
//! over, or passes win the majority; a tie is never a verdict but a reason for one more
//! trial. A history that contradicts itself (a level failed below one that passed) is
//! re-tested, the failing level first. When the trials a level may have are spent and the
//! contradiction stands, or the search runs out of trials, the goal says so and gives the
//! range it narrowed to, never one number.

use std::time::Duration;

use super::trial::{Trial, TrialVerdict};

/// How the search runs.
#[derive(Clone, Debug)]
pub struct SearchConfig {
    /// The first level tried (requests per second, or connections).
    pub start: f64,
    /// Stop narrowing when (fail − pass) / pass is at most this.
    pub precision: f64,
    /// Levels are whole numbers (a concurrency search).
    pub integer: bool,
    /// How many more failures than passes, beyond one, decide that a level fails: 1 (the
    /// default) means a failure is always tried again before it counts.
    pub repeats: u32,
    pub trial_duration: Duration,
    pub final_duration: Duration,
    /// The search gives up (answers marked unsettled) after this many trials.
    pub max_trials: usize,
    /// The highest level ever tried (`--max-rate`, as Nighthawk's step controller's range
    /// ends): a goal that passes there answers "at least" it.
    pub max_level: Option<f64>,
}

impl SearchConfig {
    /// The most trials (short and confirmation) one level gets, to settle a tie or a
    /// contradiction.
    pub fn level_cap(&self) -> usize {
        2 * (1 + self.repeats as usize) + 1
    }
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Trial { level: f64, duration: Duration, confirmation: bool },
    Done,
}

/// How a goal's answer came about.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// Narrowed to the precision and confirmed by a full-length trial.
    Found,
    /// The very first level already failed: there is no answer at or above it.
    FirstTrialFailed,
    /// The load generator could not drive the levels above the answer: the server's limit
    /// is at least the answer, maybe more.
    GeneratorBound { limit: f64 },
    /// The trials contradict each other and stayed so after the re-tests a level may have:
    /// `failed` failed although `passed`, above it, passed. The answer lies in between the
    /// highest pass below the failure and `passed`; the host is too noisy to say where.
    Inconsistent { failed: f64, passed: f64 },
    /// Out of trials (`--max-trials`), or interrupted, before the answer was narrowed and
    /// confirmed: it lies between `max` and `failed_at`.
    Unfinished,
    /// Every level up to the search's bound (`--max-rate`) passed, the bound confirmed: the
    /// capacity is at least that.
    Bounded { limit: f64 },
}

/// One goal's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The highest level that passed below every failure (and, when found, was confirmed).
    pub max: Option<f64>,
    /// The lowest level that failed.
    pub failed_at: Option<f64>,
    /// The trials at `max` its verdict rests on.
    pub trials: usize,
    pub status: Status,
}

impl Answer {
    /// An answer a user can act on: found, or a lower bound the generator set.
    pub fn usable(&self) -> bool {
        match self.status {
            Status::Found | Status::Bounded { .. } => true,
            Status::GeneratorBound { .. } => self.max.is_some(),
            _ => false,
        }
    }
}

#[derive(Debug)]
pub struct Search {
    cfg: SearchConfig,
    goals: usize,
    trials: Vec<Trial>,
    /// For each trial, the goal that asked for it (trials judge every goal; this only keeps
    /// the goals' shares of `max_trials` fair).
    asked_by: Vec<Option<usize>>,
}

/// A level's verdict for one goal, from every trial at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LevelVerdict {
    Pass,
    Fail,
    /// Every trial there was invalid.
    Invalid,
    /// The trials there do not decide it yet (a lone failure, a tie): run it again.
    Undecided,
}

impl Search {
    pub fn new(cfg: SearchConfig, goals: usize) -> Search {
        Search { cfg, goals, trials: Vec::new(), asked_by: Vec::new() }
    }

    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }

    pub fn record(&mut self, trial: Trial) {
        let asked_by = self.choose().map(|(g, _)| g);
        self.asked_by.push(asked_by);
        self.trials.push(trial);
    }

    /// The distinct levels tried, ascending.
    fn levels(&self) -> Vec<f64> {
        let mut out: Vec<f64> = self.trials.iter().map(|t| t.level).collect();
        out.sort_by(f64::total_cmp);
        out.dedup();
        out
    }

    /// Every trial run at `level`.
    fn at(&self, level: f64) -> impl Iterator<Item = &Trial> + '_ {
        self.trials.iter().filter(move |t| t.level == level)
    }

    fn level_verdict(&self, goal: usize, level: f64) -> LevelVerdict {
        let votes: Vec<TrialVerdict> = self
            .at(level)
            .filter_map(|t| t.verdicts.get(goal).copied())
            .filter(|v| *v != TrialVerdict::Invalid)
            .collect();
        if votes.is_empty() {
            // Invalid only through the client's stalls: a transient, tried again up to the
            // level's cap before it is taken for the generator's limit.
            let stalls = self.at(level).all(|t| t.stalled);
            if stalls && self.at(level).count() < self.cfg.level_cap() {
                return LevelVerdict::Undecided;
            }
            return LevelVerdict::Invalid;
        }
        let passes = votes.iter().filter(|v| **v == TrialVerdict::Pass).count();
        let fails = votes.len() - passes;
        // Two failed full-length confirmations fail a level whatever the short trials said:
        // what shows only over a longer run (a slow leak, a filling queue) is real.
        let failed_confirmations = self
            .at(level)
            .filter(|t| t.confirmation)
            .filter(|t| matches!(t.verdicts.get(goal), Some(TrialVerdict::Fail { .. })))
            .count();
        let need = 1 + self.cfg.repeats as usize;
        if failed_confirmations >= 2 {
            return LevelVerdict::Fail;
        }
        if fails == 0 {
            return LevelVerdict::Pass;
        }
        if fails >= need && fails > passes {
            return LevelVerdict::Fail;
        }
        if passes >= need && passes > fails {
            return LevelVerdict::Pass;
        }
        if self.at(level).count() >= self.cfg.level_cap() {
            // Out of trials for this level on a tie: the conservative reading, which the
            // contradiction check then reports if a pass stands above it.
            return if passes > fails { LevelVerdict::Pass } else { LevelVerdict::Fail };
        }
        LevelVerdict::Undecided
    }

    /// The lowest level at which the generator could not drive any trial (a stall is a
    /// transient, not a limit, unless every trial the level may have stalled).
    fn generator_limit(&self) -> Option<f64> {
        self.trials
            .iter()
            .filter(|t| {
                t.invalid.is_some() || t.verdicts.iter().all(|v| *v == TrialVerdict::Invalid)
            })
            .filter(|t| !t.stalled || self.at(t.level).count() >= self.cfg.level_cap())
            .map(|t| t.level)
            .reduce(f64::min)
    }

    fn decided(&self, goal: usize, verdict: LevelVerdict) -> impl Iterator<Item = f64> + '_ {
        self.levels().into_iter().filter(move |l| self.level_verdict(goal, *l) == verdict)
    }

    /// The goal's (highest pass below the lowest fail, lowest fail) from every trial so far.
    fn bounds(&self, goal: usize) -> (Option<f64>, Option<f64>) {
        let fail = self.decided(goal, LevelVerdict::Fail).reduce(f64::min);
        let pass = self
            .decided(goal, LevelVerdict::Pass)
            .filter(|l| fail.is_none_or(|f| *l < f))
            .reduce(f64::max);
        (pass, fail)
    }

    /// A contradiction: the lowest failed level and the highest level above it that passed.
    fn contradiction(&self, goal: usize) -> Option<(f64, f64)> {
        let fail = self.decided(goal, LevelVerdict::Fail).reduce(f64::min)?;
        let pass = self.decided(goal, LevelVerdict::Pass).filter(|l| *l > fail).reduce(f64::max)?;
        Some((fail, pass))
    }

    fn confirmed(&self, goal: usize, level: f64) -> bool {
        self.at(level).any(|t| t.confirmation && t.verdicts.get(goal) == Some(&TrialVerdict::Pass))
    }

    fn short(&self, level: f64) -> Next {
        Next::Trial { level, duration: self.cfg.trial_duration, confirmation: false }
    }

    fn first_failed(&self, goal: usize) -> bool {
        self.trials.first().is_some_and(|f| {
            self.level_verdict(goal, f.level) == LevelVerdict::Fail
                && !self.decided(goal, LevelVerdict::Pass).any(|l| l < f.level)
        })
    }

    /// What the goal wants tried next, if anything.
    fn wants(&self, goal: usize) -> Option<Next> {
        if self.trials.is_empty() {
            return Some(self.short(self.cfg.start));
        }
        // A level its trials do not decide yet is tried again before anything is concluded.
        if let Some(l) = self.decided(goal, LevelVerdict::Undecided).next() {
            return Some(self.short(l));
        }
        if self.first_failed(goal) {
            return None;
        }
        // A failure below a pass: re-test the failure first (noise slows, it rarely speeds),
        // then the pass, each up to its cap; a contradiction that survives both is reported.
        if let Some((fail, pass)) = self.contradiction(goal) {
            let cap = self.cfg.level_cap();
            return [fail, pass]
                .into_iter()
                .find(|l| self.at(*l).count() < cap)
                .map(|l| self.short(l));
        }
        // Above the lowest failure, or the lowest level the generator could not drive,
        // nothing is known: narrow below whichever comes first.
        let (pass, fail) = self.bounds(goal);
        let pass_level = pass?;
        let upper = match (fail, self.generator_limit()) {
            (Some(f), Some(l)) => Some(f.min(l)),
            (f, l) => f.or(l),
        };
        match upper {
            // Nothing failed yet: double, up to the bound, then confirm the bound.
            None => match self.cfg.max_level {
                Some(max) if pass_level >= max => self.confirm(goal, pass_level),
                Some(max) => Some(self.short(self.round(pass_level * 2.0).min(max))),
                None => Some(self.short(self.round(pass_level * 2.0))),
            },
            Some(upper) if (upper - pass_level) / pass_level > self.cfg.precision => {
                let mid = self.round((pass_level + upper) / 2.0);
                if mid > pass_level && mid < upper {
                    Some(self.short(mid))
                } else {
                    self.confirm(goal, pass_level)
                }
            }
            Some(_) => self.confirm(goal, pass_level),
        }
    }

    fn confirm(&self, goal: usize, level: f64) -> Option<Next> {
        // A second confirmation may follow a failed first one (and the short re-tests the
        // failure calls for); two failed confirmations fail the level.
        let tried = self.at(level).filter(|t| t.confirmation).count();
        (tried < 2 && !self.confirmed(goal, level)).then_some(Next::Trial {
            level,
            duration: self.cfg.final_duration,
            confirmation: true,
        })
    }

    fn round(&self, level: f64) -> f64 {
        if self.cfg.integer {
            level.floor().max(1.0)
        } else {
            // Rates to three significant digits: 1234.567 tries as 1230.
            let mag = 10f64.powf(level.abs().log10().floor() - 2.0);
            (level / mag).round() * mag
        }
    }

    /// The next trial, or done.
    pub fn next(&self) -> Next {
        if self.trials.len() >= self.cfg.max_trials {
            return Next::Done;
        }
        self.choose().map_or(Next::Done, |(_, n)| n)
    }

    /// Which goal's wanted trial runs next: the goal that has asked for the fewest trials so
    /// far, so one goal whose bound sits in noise (re-tests, failed confirmations) cannot spend
    /// every trial of the search while another never leaves its ramp; among equals, the lowest
    /// level (cheapest first, and it informs the goals above).
    fn choose(&self) -> Option<(usize, Next)> {
        let spent = |g: usize| self.asked_by.iter().filter(|a| **a == Some(g)).count();
        let mut best: Option<(usize, usize, f64, Next)> = None;
        for g in 0..self.goals {
            if let Some(n @ Next::Trial { level, .. }) = self.wants(g) {
                let better = match &best {
                    None => true,
                    Some((_, s, l, _)) => (spent(g), level) < (*s, *l),
                };
                if better {
                    best = Some((g, spent(g), level, n));
                }
            }
        }
        best.map(|(g, _, _, n)| (g, n))
    }

    /// Each goal's answer from the trials so far.
    pub fn answers(&self) -> Vec<Answer> {
        (0..self.goals).map(|g| self.answer(g)).collect()
    }

    fn answer(&self, goal: usize) -> Answer {
        let (pass, fail) = self.bounds(goal);
        let trials = pass.map_or(0, |p| self.at(p).count());
        let settled = self.wants(goal).is_none();
        let status = match (pass, fail) {
            _ if settled && self.first_failed(goal) => Status::FirstTrialFailed,
            _ if settled && self.contradiction(goal).is_some() => {
                let (failed, passed) = self.contradiction(goal).unwrap_or_default();
                Status::Inconsistent { failed, passed }
            }
            // Not even the first level could be driven: the generator's limit, not the server's.
            (None, _) if settled => match self.generator_limit() {
                Some(limit) => Status::GeneratorBound { limit },
                None => Status::Unfinished,
            },
            (Some(p), _) if settled && self.confirmed(goal, p) => {
                match (fail, self.generator_limit()) {
                    (None, None) if self.cfg.max_level.is_some_and(|m| p >= m) => {
                        Status::Bounded { limit: p }
                    }
                    (None, Some(limit)) => Status::GeneratorBound { limit },
                    (Some(f), Some(limit)) if limit < f => Status::GeneratorBound { limit },
                    _ => Status::Found,
                }
            }
            _ => Status::Unfinished,
        };
        Answer { max: pass, failed_at: fail, trials, status }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
