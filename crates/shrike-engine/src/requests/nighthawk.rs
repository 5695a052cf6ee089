//! Nighthawk's request-source plugins, for command lines that already use them.

use std::num::NonZeroU64;
use std::path::PathBuf;

use serde::Deserialize;

use super::file::{json_body, with_lines, At, FileError, Scalar};
use crate::config::RequestSpec;

/// Nighthawk's request-source plugin config (`--request-source-plugin-config`), JSON or the
/// relaxed form Nighthawk's docs use (unquoted keys). Supports
/// `nighthawk.file-based-request-source-plugin` (`file_path`, a YAML or JSON file of
/// `options: [...]`) and `nighthawk.in-line-options-list-request-source-plugin`
/// (`options_list: {options: [...]}`), each with an optional `num_requests`: the number of
/// requests each worker sends before it stops.
pub fn nighthawk_plugin(
    config: &str,
    headers: &[(String, String)],
) -> Result<(Vec<RequestSpec>, Option<NonZeroU64>), FileError> {
    let bad = FileError;
    // Strict JSON, then Nighthawk's relaxed form (unquoted keys), then YAML.
    let cfg: PluginConfig = match serde_json::from_str(config) {
        Ok(c) => c,
        Err(e) => shrike_stats::relaxed::to_json(config)
            .and_then(|json| serde_json::from_str(&json).ok())
            .map_or_else(|| serde_norway::from_str(config), Ok)
            .map_err(|_| bad(e.to_string()))?,
    };
    let tc = cfg.typed_config;
    let limit = match tc.num_requests {
        None => None,
        Some(n) => {
            let n = n.0.parse::<u64>().ok().and_then(NonZeroU64::new);
            Some(n.ok_or_else(|| bad("num_requests must be a positive integer".into()))?)
        }
    };
    let (origin, text, list) = match cfg.name.as_str() {
        "nighthawk.file-based-request-source-plugin" => {
            let path = tc.file_path.ok_or_else(|| bad("typed_config.file_path is missing".into()))?;
            let name = path.display().to_string();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| bad(format!("cannot read {name}: {e}")))?;
            let list: OptionsList = serde_norway::from_str(&text)
                .map_err(|e| FileError(format!("{name}: {e} (expected options: [...])")))?;
            (name, Some(text), list)
        }
        "nighthawk.in-line-options-list-request-source-plugin" => {
            let list = tc
                .options_list
                .ok_or_else(|| bad("typed_config.options_list is missing".into()))?;
            ("--request-source-plugin-config".to_string(), None, list)
        }
        other => {
            return Err(bad(format!(
                "unsupported plugin {other:?}: expected nighthawk.file-based-request-source-plugin or nighthawk.in-line-options-list-request-source-plugin"
            )))
        }
    };
    if list.options.is_empty() {
        return Err(FileError(format!("{origin}: options is empty")));
    }
    let items = match &text {
        Some(t) => with_lines(t, list.options),
        None => list.options.into_iter().enumerate().map(|(i, o)| (At::Entry(i + 1), o)).collect(),
    };
    let specs = items
        .into_iter()
        .map(|(at, o)| {
            let origin = format!("{origin}:{at}");
            o.into_spec(headers)
                .map(|s| s.with_origin(origin.clone()))
                .map_err(|m| FileError(format!("{origin}: {m}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((specs, limit))
}

#[derive(Deserialize)]
struct PluginConfig {
    name: String,
    typed_config: TypedConfig,
}

#[derive(Deserialize)]
struct TypedConfig {
    #[serde(rename = "@type", default)]
    _type: Option<String>,
    file_path: Option<PathBuf>,
    num_requests: Option<Scalar>,
    options_list: Option<OptionsList>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsList {
    options: Vec<NhOptions>,
}

/// Nighthawk's `RequestOptions`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NhOptions {
    request_method: Option<String>,
    #[serde(default)]
    request_headers: Vec<NhHeader>,
    request_body_size: Option<Scalar>,
    json_body: Option<String>,
}

#[derive(Deserialize)]
struct NhHeader {
    header: NhKv,
}

#[derive(Deserialize)]
struct NhKv {
    key: String,
    value: Scalar,
}

impl NhOptions {
    fn into_spec(self, defaults: &[(String, String)]) -> Result<RequestSpec, FileError> {
        let mut method = self.request_method.unwrap_or_else(|| "GET".into());
        let mut path = None;
        let mut headers = Vec::new();
        // Nighthawk's options carry the path and method as pseudo-headers.
        for h in self.request_headers {
            match h.header.key.to_ascii_lowercase().as_str() {
                ":path" => path = Some(h.header.value.0),
                ":method" => method = h.header.value.0,
                ":authority" => headers.push(("host".to_string(), h.header.value.0)),
                _ => headers.push((h.header.key, h.header.value.0)),
            }
        }
        for (k, v) in defaults {
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(k)) {
                headers.push((k.clone(), v.clone()));
            }
        }
        let size = match self.request_body_size {
            None => 0,
            Some(s) => s.0.parse::<u32>().map_err(|_| {
                FileError(format!(
                    "request_body_size must be an integer up to {}, got {:?}",
                    u32::MAX,
                    s.0
                ))
            })?,
        };
        let mut spec =
            RequestSpec::try_new(&method, headers, size).map_err(|e| FileError(e.to_string()))?;
        if let Some(j) = self.json_body {
            if size > 0 {
                return Err(FileError(
                    "give either request_body_size or json_body, not both".into(),
                ));
            }
            spec = json_body(spec, &j)?;
        }
        if let Some(p) = path {
            spec = spec.with_path(&p).map_err(|e| FileError(e.to_string()))?;
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nighthawk_file_based_source() {
        let p = std::env::temp_dir().join(format!("shrike-nh-{}.yaml", std::process::id()));
        std::fs::write(
            &p,
            "options:\n  - request_method: POST\n    request_body_size: 10\n    request_headers:\n      - header: {key: \":path\", value: \"/nh\"}\n      - header: {key: \"x-n\", value: \"1\"}\n  - request_method: GET\n",
        )
        .expect("write");
        let cfg = format!(
            "{{name:\"nighthawk.file-based-request-source-plugin\",typed_config:{{\"@type\":\"type.googleapis.com/nighthawk.request_source.FileBasedOptionsListRequestSourceConfig\",file_path:\"{}\",num_requests:5}}}}",
            p.display()
        );
        let (specs, limit) = nighthawk_plugin(&cfg, &[]).expect("plugin");
        assert_eq!(limit.map(NonZeroU64::get), Some(5));
        assert_eq!(
            (specs[0].method(), specs[0].path(), specs[0].body_size()),
            ("POST", Some("/nh"), 10)
        );
        assert_eq!(specs[0].headers(), &[("x-n".to_string(), "1".to_string())]);
        assert!(
            specs[1].origin().is_some_and(|o| o.ends_with(".yaml:7")),
            "{:?}",
            specs[1].origin()
        );
        assert!(nighthawk_plugin("{name: \"nighthawk.other\", typed_config: {}}", &[]).is_err());
    }
}
