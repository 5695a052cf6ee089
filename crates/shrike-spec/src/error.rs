//! The one error a run spec has: which field is wrong, and why.
//!
//! A reason may name other options ("cannot be used with `requests_per_second`"). It keeps
//! them as options, not as text, so each front end can name them its own way: JSON names by
//! default, flags on the command line ([`SpecError::render`] with [`crate::names::flag_for`]).

use std::fmt;

use crate::names::Opt;

/// One piece of a reason: text, or a reference to an option by its name (a dotted path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Opt(&'static str),
}

impl From<&str> for Part {
    fn from(s: &str) -> Part {
        Part::Text(s.to_string())
    }
}

impl From<String> for Part {
    fn from(s: String) -> Part {
        Part::Text(s)
    }
}

impl From<Opt> for Part {
    fn from(o: Opt) -> Part {
        Part::Opt(o.name)
    }
}

/// A reason: text with references to options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message(pub Vec<Part>);

impl From<&str> for Message {
    fn from(s: &str) -> Message {
        Message(vec![s.into()])
    }
}

impl From<String> for Message {
    fn from(s: String) -> Message {
        Message(vec![s.into()])
    }
}

impl Message {
    fn render(&self, name: &dyn Fn(&str) -> String) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Opt(o) => name(o),
            })
            .collect()
    }
}

/// A reason made of text and options: `msg!("cannot be used with ", names::STAGES)`.
#[macro_export]
macro_rules! msg {
    ($($part:expr),+ $(,)?) => {
        $crate::error::Message(vec![$($crate::error::Part::from($part)),+])
    };
}

/// A field of a run spec is invalid. `field` is the option's JSON name (`connections`,
/// `request_options.request_method`), or a path inside one
/// (`transport_socket.typed_config.sni`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub field: String,
    /// Reads as a continuation of the field name: `must be at least 1`, or a clause of its
    /// own after a colon (see [`SpecError::invalid`]).
    message: Message,
    clause: bool,
}

impl SpecError {
    /// `field` followed by a predicate: `connections must be at least 1`.
    pub fn must(field: impl Into<FieldName>, predicate: impl Into<Message>) -> SpecError {
        SpecError { field: field.into().0, message: predicate.into(), clause: false }
    }

    /// `field` followed by a colon and a free-standing reason: `stages: stage "x": …`.
    pub fn invalid(field: impl Into<FieldName>, reason: impl fmt::Display) -> SpecError {
        SpecError { field: field.into().0, message: reason.to_string().into(), clause: true }
    }

    /// The same error under another name for the field (`file.json: field`).
    pub fn renamed(mut self, field: impl Into<String>) -> SpecError {
        self.field = field.into();
        self
    }

    /// The error with the field and every option it mentions named by `name` (which gets
    /// JSON names: `name` may give flags instead).
    pub fn render(&self, name: &dyn Fn(&str) -> String) -> String {
        let reason = self.message.render(name);
        let field = name(&self.field);
        if self.clause {
            format!("{field}: {reason}")
        } else {
            format!("{field} {reason}")
        }
    }

    /// The reason alone, without the field, options by their JSON names.
    pub fn reason(&self) -> String {
        self.message.render(&|n| n.to_string())
    }
}

/// A field as an error names it: an option, or a path inside one.
#[derive(Clone, Debug)]
pub struct FieldName(pub String);

impl From<Opt> for FieldName {
    fn from(o: Opt) -> FieldName {
        FieldName(o.name.to_string())
    }
}

impl From<&str> for FieldName {
    fn from(s: &str) -> FieldName {
        FieldName(s.to_string())
    }
}

impl From<String> for FieldName {
    fn from(s: String) -> FieldName {
        FieldName(s)
    }
}

impl From<&String> for FieldName {
    fn from(s: &String) -> FieldName {
        FieldName(s.clone())
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&|n| n.to_string()))
    }
}

impl std::error::Error for SpecError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names;

    #[test]
    fn options_in_a_reason_are_named_by_the_front_end() {
        let e = SpecError::must(
            names::OPEN_LOOP,
            msg!("needs a rate: ", names::REQUESTS_PER_SECOND, " \"max\" is a closed loop"),
        );
        assert_eq!(
            e.to_string(),
            "open_loop needs a rate: requests_per_second \"max\" is a closed loop"
        );
        assert_eq!(
            e.render(&names::flag_for),
            "--open-loop needs a rate: --rps \"max\" is a closed loop"
        );
    }
}
