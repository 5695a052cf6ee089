//! Request templates: `{{seq}}`, `{{worker}}`, `{{random_id}}` and `{{choice:a|b|c}}` in paths,
//! header values and text bodies.
//!
//! A template is parsed once, at start-up, into literal and placeholder segments; rendering
//! appends to a caller-owned buffer that is reused for every request, so a templated request
//! costs a few copies and no allocation. Text without `{{` is no template at all: such requests
//! stay pre-encoded (see [`super`]).

use std::cell::Cell;

/// One piece of a parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    /// `lits[start..end]`.
    Lit(usize, usize),
    /// The request's sequence number, unique across the run's workers.
    Seq,
    /// The worker's index.
    Worker,
    /// 32 hex digits, fresh per request (the same value everywhere in one request).
    RandomId,
    /// One of the options, picked uniformly per occurrence.
    Choice(Box<[Box<[u8]>]>),
}

/// A parsed template: literal bytes plus placeholders, rendered by [`Template::render`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Template {
    lits: Vec<u8>,
    segs: Vec<Seg>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    #[error("unterminated placeholder {0:?}: expected '}}}}'")]
    Unterminated(String),
    #[error(
        "unknown placeholder {{{{{0}}}}}: expected {{{{seq}}}}, {{{{worker}}}}, {{{{random_id}}}} or {{{{choice:a|b|...}}}}"
    )]
    Unknown(String),
    #[error("{{{{choice:...}}}} needs at least one option, as in {{{{choice:a|b}}}}")]
    EmptyChoice,
}

impl Template {
    /// Parses `text`. Anything outside `{{…}}` is literal; placeholder names are exact.
    pub fn parse(text: &str) -> Result<Template, TemplateError> {
        let mut t = Template::default();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            t.push_literal(&rest.as_bytes()[..open]);
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or_else(|| {
                TemplateError::Unterminated(rest[open..].chars().take(40).collect())
            })?;
            let name = after[..close].trim();
            t.segs.push(match name {
                "seq" => Seg::Seq,
                "worker" => Seg::Worker,
                "random_id" => Seg::RandomId,
                _ => match name.strip_prefix("choice:") {
                    Some(list) => {
                        let opts: Box<[Box<[u8]>]> =
                            list.split('|').map(|o| o.as_bytes().into()).collect();
                        if list.is_empty() {
                            return Err(TemplateError::EmptyChoice);
                        }
                        Seg::Choice(opts)
                    }
                    None => return Err(TemplateError::Unknown(name.to_string())),
                },
            });
            rest = &after[close + 2..];
        }
        t.push_literal(rest.as_bytes());
        Ok(t)
    }

    /// A template of literal bytes only.
    pub fn literal(bytes: &[u8]) -> Template {
        let mut t = Template::default();
        t.push_literal(bytes);
        t
    }

    /// Appends literal bytes (merged with a preceding literal).
    pub fn push_literal(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let start = self.lits.len();
        self.lits.extend_from_slice(bytes);
        let end = self.lits.len();
        match self.segs.last_mut() {
            Some(Seg::Lit(_, e)) if *e == start => *e = end,
            _ => self.segs.push(Seg::Lit(start, end)),
        }
    }

    /// Appends another template.
    pub fn push(&mut self, other: &Template) {
        for s in &other.segs {
            match s {
                Seg::Lit(a, b) => self.push_literal(&other.lits[*a..*b]),
                s => self.segs.push(s.clone()),
            }
        }
    }

    /// Whether rendering can differ from request to request.
    pub fn has_placeholders(&self) -> bool {
        self.segs.iter().any(|s| !matches!(s, Seg::Lit(..)))
    }

    /// Every `{{choice:…}}` option, so callers can check each is valid where it goes (a path,
    /// a header value) once, instead of failing requests at run time.
    pub fn choice_options(&self) -> impl Iterator<Item = &[u8]> {
        self.segs.iter().flat_map(|s| match s {
            Seg::Choice(o) => o.iter().map(|o| &o[..]).collect::<Vec<_>>(),
            _ => Vec::new(),
        })
    }

    /// Appends the rendering to `out`.
    pub fn render(&self, out: &mut Vec<u8>, cx: &mut RenderCx<'_>) {
        for s in &self.segs {
            match s {
                Seg::Lit(a, b) => out.extend_from_slice(&self.lits[*a..*b]),
                Seg::Seq => push_decimal(out, cx.seq),
                Seg::Worker => push_decimal(out, cx.worker),
                Seg::RandomId => {
                    let id = match cx.random_id {
                        Some(id) => id,
                        None => {
                            let id = (cx.rng.next(), cx.rng.next());
                            cx.random_id = Some(id);
                            id
                        }
                    };
                    push_hex(out, id.0);
                    push_hex(out, id.1);
                }
                Seg::Choice(opts) => {
                    let i = (cx.rng.next() % opts.len() as u64) as usize;
                    out.extend_from_slice(&opts[i]);
                }
            }
        }
    }

    /// The rendering with fixed sample values (sequence 0, worker 0, first choice), used to
    /// validate what a template can produce (for example that a JSON body stays JSON).
    pub fn sample(&self) -> Vec<u8> {
        let rng = Rng::new(1);
        let mut cx = RenderCx { seq: 0, worker: 0, random_id: Some((0, 0)), rng: &rng };
        let first_only = Template {
            lits: self.lits.clone(),
            segs: self
                .segs
                .iter()
                .map(|s| match s {
                    Seg::Choice(o) => Seg::Choice(o[..1].into()),
                    s => s.clone(),
                })
                .collect(),
        };
        let mut out = Vec::new();
        first_only.render(&mut out, &mut cx);
        out
    }
}

/// What one request's rendering may use: its sequence number, the worker, and randomness.
#[derive(Debug)]
pub struct RenderCx<'a> {
    pub seq: u64,
    pub worker: u64,
    /// Drawn on first use, then reused within the request.
    pub random_id: Option<(u64, u64)>,
    pub rng: &'a Rng,
}

/// xorshift64*, as the pacer's jitter uses: fast and seedable; ids and choices need spread,
/// not cryptographic strength. In a `Cell` because a worker's tasks share it.
#[derive(Debug)]
pub struct Rng(Cell<u64>);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(Cell::new(seed | 1))
    }

    pub fn next(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

pub(crate) fn push_decimal(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn push_hex(out: &mut Vec<u8>, v: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        out.push(HEX[((v >> (shift * 4)) & 0xf) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(t: &Template, seq: u64, rng: &Rng) -> String {
        let mut out = Vec::new();
        t.render(&mut out, &mut RenderCx { seq, worker: 3, random_id: None, rng });
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn parses_and_renders_every_placeholder() {
        let t = Template::parse(
            "/a/{{seq}}/{{ worker }}?x={{choice:p|q}}&id={{random_id}}-{{random_id}}",
        )
        .expect("template");
        assert!(t.has_placeholders());
        let rng = Rng::new(7);
        let mut seen = std::collections::BTreeSet::new();
        for seq in [0, 9, 1234567890123] {
            let s = render(&t, seq, &rng);
            let rest = s.strip_prefix(&format!("/a/{seq}/3?x=")).expect(&s);
            let (choice, id) = rest.split_once("&id=").expect("id");
            seen.insert(choice.to_string());
            let (a, b) = id.split_once('-').expect("two ids");
            assert_eq!(a, b, "one random id per request");
            assert!(a.len() == 32 && a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        }
        assert!(seen.iter().all(|c| c == "p" || c == "q"), "{seen:?}");
    }

    #[test]
    fn literal_text_is_not_a_template() {
        let t = Template::parse("/plain/path { not a placeholder }").expect("template");
        assert!(!t.has_placeholders());
        assert_eq!(render(&t, 0, &Rng::new(1)), "/plain/path { not a placeholder }");
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Template::parse("/{{nope}}").unwrap_err();
        assert!(e.to_string().contains("unknown placeholder {{nope}}"), "{e}");
        assert!(Template::parse("/{{seq").unwrap_err().to_string().contains("unterminated"));
        assert_eq!(Template::parse("{{choice:}}"), Err(TemplateError::EmptyChoice));
    }

    #[test]
    fn choices_are_uniform_enough() {
        let t = Template::parse("{{choice:a|b|c}}").expect("template");
        let rng = Rng::new(42);
        let mut counts = [0u32; 3];
        for _ in 0..3000 {
            counts[(render(&t, 0, &rng).as_bytes()[0] - b'a') as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
        assert_eq!(t.sample(), b"a");
    }
}
