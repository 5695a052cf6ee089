//! The one error a run spec has: which field is wrong, and why.

use std::fmt;

/// A field of a run spec is invalid. `field` is the option's JSON name (`connections`,
/// `request_options.request_method`); a front end may rename it to its own spelling (the CLI
/// says `--connections`) with [`SpecError::renamed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub field: String,
    /// Reads as a continuation of the field name: `must be at least 1`, or a clause of its
    /// own after a colon (see [`SpecError::invalid`]).
    message: String,
    clause: bool,
}

impl SpecError {
    /// `field` followed by a predicate: `connections must be at least 1`.
    pub fn must(field: impl Into<String>, predicate: impl Into<String>) -> SpecError {
        SpecError { field: field.into(), message: predicate.into(), clause: false }
    }

    /// `field` followed by a colon and a free-standing reason: `stages: stage "x": …`.
    pub fn invalid(field: impl Into<String>, reason: impl fmt::Display) -> SpecError {
        SpecError { field: field.into(), message: reason.to_string(), clause: true }
    }

    /// The same error under another name for the field (a flag, `file.json: field`).
    pub fn renamed(mut self, field: impl Into<String>) -> SpecError {
        self.field = field.into();
        self
    }

    /// The same error with its reason reworded (a front end naming options its own way).
    pub fn with_message(mut self, message: impl Into<String>) -> SpecError {
        self.message = message.into();
        self
    }

    /// The reason alone, without the field.
    pub fn reason(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.clause {
            write!(f, "{}: {}", self.field, self.message)
        } else {
            write!(f, "{} {}", self.field, self.message)
        }
    }
}

impl std::error::Error for SpecError {}
