//! The search: which trial to run next, and what the trials so far say.
//!
//! MLRsearch's shape (IETF BMWG): short trials while narrowing, a full-length confirmation at
//! the end. An exponential ramp from the start level doubles until some goal fails, then
//! bisection narrows every goal's [highest pass, lowest fail] to the precision; trials are
//! shared, so one trial judges every goal, and the lowest level any goal needs goes first. A
//! level whose failures are all narrow is repeated before it counts, and its verdict is the
//! majority. Bounds are recomputed from every trial each time, so a confirmation that fails
//! simply reopens the interval below it.

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
    /// Extra trials a level whose failures are all narrow gets.
    pub repeats: u32,
    pub trial_duration: Duration,
    pub final_duration: Duration,
    /// The search gives up (answers marked unfinished) after this many trials.
    pub max_trials: usize,
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
    /// Out of trials, or interrupted, before the answer was narrowed and confirmed.
    Unfinished,
}

/// One goal's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The highest level that passed (and, when found, was confirmed).
    pub max: Option<f64>,
    /// The lowest level that failed.
    pub failed_at: Option<f64>,
    /// The trials at `max` its verdict rests on.
    pub trials: usize,
    pub status: Status,
}

#[derive(Debug)]
pub struct Search {
    cfg: SearchConfig,
    goals: usize,
    trials: Vec<Trial>,
}

/// A level's verdict for one goal, from the short trials at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LevelVerdict {
    Pass,
    Fail,
    /// Every trial there was invalid.
    Invalid,
    /// Narrow failures, and repeats left: run it again.
    Undecided,
}

impl Search {
    pub fn new(cfg: SearchConfig, goals: usize) -> Search {
        Search { cfg, goals, trials: Vec::new() }
    }

    pub fn trials(&self) -> &[Trial] {
        &self.trials
    }

    pub fn record(&mut self, trial: Trial) {
        self.trials.push(trial);
    }

    /// The distinct levels tried with short trials, in the order first tried.
    fn levels(&self) -> Vec<f64> {
        let mut out: Vec<f64> = Vec::new();
        for t in self.trials.iter().filter(|t| !t.confirmation) {
            if !out.contains(&t.level) {
                out.push(t.level);
            }
        }
        out
    }

    fn level_verdict(&self, goal: usize, level: f64) -> LevelVerdict {
        let at: Vec<TrialVerdict> = self
            .trials
            .iter()
            .filter(|t| !t.confirmation && t.level == level)
            .filter_map(|t| t.verdicts.get(goal).copied())
            .filter(|v| *v != TrialVerdict::Invalid)
            .collect();
        if at.is_empty() {
            return LevelVerdict::Invalid;
        }
        let passes = at.iter().filter(|v| **v == TrialVerdict::Pass).count();
        let fails = at.len() - passes;
        let all_narrow = at.iter().all(|v| !matches!(v, TrialVerdict::Fail { narrow: false }));
        if fails > 0 && all_narrow && at.len() < 1 + self.cfg.repeats as usize {
            return LevelVerdict::Undecided;
        }
        if passes > fails {
            LevelVerdict::Pass
        } else {
            LevelVerdict::Fail
        }
    }

    /// The lowest level at which the generator could not drive any trial.
    fn generator_limit(&self) -> Option<f64> {
        self.trials
            .iter()
            .filter(|t| {
                t.invalid.is_some() || t.verdicts.iter().all(|v| *v == TrialVerdict::Invalid)
            })
            .map(|t| t.level)
            .reduce(f64::min)
    }

    /// The goal's (highest pass below the lowest fail, lowest fail) from every trial so far.
    fn bounds(&self, goal: usize) -> (Option<f64>, Option<f64>) {
        let mut fail: Option<f64> = None;
        for level in self.levels() {
            if self.level_verdict(goal, level) == LevelVerdict::Fail {
                fail = Some(fail.map_or(level, |f: f64| f.min(level)));
            }
        }
        // A failed confirmation is a failure at its level, whatever the short trials said.
        for t in self.trials.iter().filter(|t| t.confirmation) {
            if matches!(t.verdicts.get(goal), Some(TrialVerdict::Fail { .. })) {
                fail = Some(fail.map_or(t.level, |f: f64| f.min(t.level)));
            }
        }
        let pass = self
            .levels()
            .into_iter()
            .filter(|l| fail.is_none_or(|f| *l < f))
            .filter(|l| self.level_verdict(goal, *l) == LevelVerdict::Pass)
            .reduce(f64::max);
        (pass, fail)
    }

    fn confirmed(&self, goal: usize, level: f64) -> bool {
        self.trials.iter().any(|t| {
            t.confirmation && t.level == level && t.verdicts.get(goal) == Some(&TrialVerdict::Pass)
        })
    }

    /// What the goal wants tried next, if anything.
    fn wants(&self, goal: usize) -> Option<Next> {
        let short = |level: f64| Next::Trial {
            level,
            duration: self.cfg.trial_duration,
            confirmation: false,
        };
        let Some(first) = self.trials.first() else { return Some(short(self.cfg.start)) };
        // A level with narrow failures is repeated before anything else is concluded from it.
        if let Some(l) = self
            .levels()
            .into_iter()
            .find(|l| self.level_verdict(goal, *l) == LevelVerdict::Undecided)
        {
            return Some(short(l));
        }
        if self.level_verdict(goal, first.level) == LevelVerdict::Fail && !first.confirmation {
            return None;
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
            None => Some(short(self.round(pass_level * 2.0))),
            Some(upper) if (upper - pass_level) / pass_level > self.cfg.precision => {
                let mid = self.round((pass_level + upper) / 2.0);
                if mid > pass_level && mid < upper {
                    Some(short(mid))
                } else {
                    self.confirm(goal, pass_level)
                }
            }
            Some(_) => self.confirm(goal, pass_level),
        }
    }

    fn confirm(&self, goal: usize, level: f64) -> Option<Next> {
        let tried = self.trials.iter().any(|t| t.confirmation && t.level == level);
        (!tried && !self.confirmed(goal, level)).then_some(Next::Trial {
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

    /// The next trial: the lowest level any goal wants (cheapest first, and it informs the
    /// goals above), or done.
    pub fn next(&self) -> Next {
        if self.trials.len() >= self.cfg.max_trials {
            return Next::Done;
        }
        let mut best: Option<Next> = None;
        for g in 0..self.goals {
            if let Some(n @ Next::Trial { level, .. }) = self.wants(g) {
                let lower = match &best {
                    Some(Next::Trial { level: b, .. }) => level < *b,
                    _ => true,
                };
                if lower {
                    best = Some(n);
                }
            }
        }
        best.unwrap_or(Next::Done)
    }

    /// Each goal's answer from the trials so far.
    pub fn answers(&self) -> Vec<Answer> {
        (0..self.goals).map(|g| self.answer(g)).collect()
    }

    fn answer(&self, goal: usize) -> Answer {
        let (pass, fail) = self.bounds(goal);
        let trials = pass.map_or(0, |p| self.trials.iter().filter(|t| t.level == p).count());
        let first_failed = self
            .trials
            .first()
            .is_some_and(|f| self.level_verdict(goal, f.level) == LevelVerdict::Fail);
        let status = match (pass, fail) {
            (None, _) if first_failed => Status::FirstTrialFailed,
            // Not even the first level could be driven: the generator's limit, not the server's.
            (None, _) if self.wants(goal).is_none() => match self.generator_limit() {
                Some(limit) => Status::GeneratorBound { limit },
                None => Status::Unfinished,
            },
            (Some(p), _) if self.confirmed(goal, p) && self.wants(goal).is_none() => {
                match (fail, self.generator_limit()) {
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
