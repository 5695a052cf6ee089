//! `shrike report`'s pages as a browser draws them: headless Chromium (Debian's package)
//! renders a page and dumps its DOM, which the report's script stamps with what it drew
//! (`<body data-render data-errors>`, per plot `data-series`, `data-paths`, `data-width`,
//! `data-height`).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use super::{run, wait_limited, Output};

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Fails the test when Chromium is missing, naming the package: a browser check that quietly
/// does not run would pass without proving the report draws. `.ci/run` installs it.
pub fn require_chromium() {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium; \
         .ci/run does)"
    );
}

/// The page as Chromium's DOM after its scripts ran. A profile directory of its own per call,
/// so concurrent tests do not fight over Chromium's profile lock.
pub fn render(html: &Path, dir: &Path) -> String {
    require_chromium();
    let profile = dir.join("chromium-profile");
    let child = std::process::Command::new(CHROMIUM)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chromium");
    let out = wait_limited(child, Duration::from_secs(60));
    assert!(out.status.success(), "chromium failed:\n{}", out.stderr);
    assert!(out.stdout.contains("</html>"), "no DOM dumped:\n{}", out.stderr);
    out.stdout
}

/// The DOM without its scripts' source (which holds every message the page *can* show), so
/// text assertions only see what was rendered.
pub fn without_scripts(dom: &str) -> String {
    let mut out = String::new();
    let mut rest = dom;
    while let Some(at) = rest.find("<script") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find("</script>").expect("script ends");
        rest = &rest[at + end + "</script>".len()..];
    }
    out.push_str(rest);
    out
}

/// The attributes of every `<tag …>` start tag in `html`, in document order.
pub fn tags(html: &str, tag: &str) -> Vec<HashMap<String, String>> {
    let open = format!("<{tag} ");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let end = after.find('>').expect("tag ends");
        let mut attrs = HashMap::new();
        let mut s = &after[..end];
        while let Some(eq) = s.find("=\"") {
            let name = s[..eq].trim().to_string();
            let v = &s[eq + 2..];
            let close = v.find('"').expect("attribute ends");
            attrs.insert(name, v[..close].to_string());
            s = &v[close + 1..];
        }
        out.push(attrs);
        rest = &after[end..];
    }
    out
}

/// A drawn plot, as the report's script stamped it.
#[derive(Debug)]
pub struct Plot {
    pub series: usize,
    pub paths: usize,
    pub width: f64,
    pub height: f64,
    /// Top of the y-axis.
    pub ymax: f64,
}

/// Asserts the page drew without a script error and returns its plots by name.
pub fn drawn(dom: &str, files: usize) -> HashMap<String, Plot> {
    let body = tags(dom, "body").pop().expect("a body");
    let errors = dom.find("id=\"render-errors\"").map(|i| &dom[i..(i + 2000).min(dom.len())]);
    assert_eq!(body.get("data-render").map(String::as_str), Some("ok"), "{errors:?}");
    assert_eq!(body.get("data-errors").map(String::as_str), Some("0"), "{errors:?}");
    assert_eq!(body.get("data-files"), Some(&files.to_string()));
    let num = |a: &HashMap<String, String>, k: &str| -> f64 {
        a.get(k).unwrap_or_else(|| panic!("{k} in {a:?}")).parse().unwrap()
    };
    tags(dom, "figure")
        .into_iter()
        .map(|a| {
            let plot = Plot {
                series: num(&a, "data-series") as usize,
                paths: num(&a, "data-paths") as usize,
                width: num(&a, "data-width"),
                height: num(&a, "data-height"),
                ymax: num(&a, "data-ymax"),
            };
            (a["data-plot"].clone(), plot)
        })
        .collect()
}

pub fn assert_plot(plots: &HashMap<String, Plot>, name: &str, series: usize, paths: usize) {
    let p = plots.get(name).unwrap_or_else(|| panic!("plot {name} missing; have {plots:?}"));
    assert_eq!((p.series, p.paths), (series, paths), "{name}: {p:?}");
    assert!(p.width > 100.0 && p.height > 50.0, "{name} has no size: {p:?}");
}

/// Nothing in the page reaches for the network: no external scripts, styles, fonts, images or
/// frames, and no fetch APIs. (URLs inside the data, like the benchmarked target, are text.)
pub fn assert_offline(page: &str) {
    let lower = page.to_ascii_lowercase();
    for bad in [
        "src=\"http",
        "src='http",
        "href=\"http",
        "href='http",
        "url(http",
        "url(\"http",
        "url('http",
        "url(//",
        "src=\"//",
        "href=\"//",
        "@import",
        "<link",
        "<img",
        "<iframe",
        "fetch(",
        "xmlhttprequest",
        "import(",
    ] {
        assert!(!lower.contains(bad), "report references the network: {bad:?}");
    }
}

/// The data block the report embeds.
pub fn embedded_data(page: &str) -> Value {
    let open = "<script type=\"application/json\" id=\"shrike-data\">";
    let start = page.find(open).expect("data block") + open.len();
    let len = page[start..].find("</script>").expect("data block ends");
    serde_json::from_str(&page[start..start + len]).expect("data block is JSON")
}

pub fn report(args: &[&str]) -> Output {
    let mut all = vec!["report"];
    all.extend_from_slice(args);
    run(&all, Duration::from_secs(30))
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}
