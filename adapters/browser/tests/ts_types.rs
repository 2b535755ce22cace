//! The TypeScript definitions (`src/web/api.rs`) against the core's knob schema: every
//! refresh knob's path can be followed from `RefreshConfig` to a field of the knob's type,
//! and every field on the way belongs to some knob — so the types cannot drift from the
//! structs without this failing.

use stagger::{knobs, Knob, KnobKind, KnobScope};

const API: &str = include_str!("../src/web/api.rs");

/// The text of the `typescript_custom_section`.
fn types() -> &'static str {
    let start = API.find("typescript_custom_section").expect("the TS section");
    let body = &API[start..];
    let open = body.find("r#\"").expect("a raw string") + 3;
    let close = body[open..].find("\"#").expect("its end");
    &body[open..open + close]
}

/// The body of `interface NAME { … }` (to its matching brace) or `type NAME = …;`, without
/// comments.
fn declaration(name: &str) -> String {
    let ts = types();
    let (rest, interface) = match ts.find(&format!("interface {name} {{")) {
        Some(at) => (&ts[at + format!("interface {name} {{").len()..], true),
        None => {
            let head = format!("type {name} =");
            let at = ts.find(&head).unwrap_or_else(|| panic!("no TypeScript declaration of {name}"));
            (&ts[at + head.len()..], false)
        }
    };
    let end = if interface {
        let mut depth = 1;
        rest.char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '{' => 1,
                    '}' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(rest.len(), |(i, _)| i)
    } else {
        rest.find(";\n").unwrap_or(rest.len())
    };
    let mut body = String::new();
    let mut text = &rest[..end];
    while let Some(open) = text.find("/**") {
        body.push_str(&text[..open]);
        text = text[open..].find("*/").map_or("", |close| &text[open + close + 2..]);
    }
    body.push_str(text);
    body
}

/// The type named for `field` in a declaration body (`field: Type` or `{ field: Type }`).
fn field_type(body: &str, field: &str) -> Option<String> {
    let mut search = body;
    while let Some(at) = search.find(&format!("{field}:")) {
        let before = search[..at].chars().next_back();
        let after = &search[at + field.len() + 1..];
        if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
            let ty = after.trim_start();
            let end = ty.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(ty.len());
            return Some(ty[..end].to_string());
        }
        search = after;
    }
    None
}

fn ts_type_of(kind: KnobKind) -> &'static str {
    match kind {
        KnobKind::Duration => "Duration",
        KnobKind::Bool => "boolean",
        KnobKind::U32 | KnobKind::U64 | KnobKind::F64 => "number",
        KnobKind::Choice { .. } => "(a choice)",
    }
}

fn refresh_knobs() -> impl Iterator<Item = &'static Knob> {
    knobs().iter().filter(|k| k.scope() == KnobScope::Refresh)
}

#[test]
fn every_refresh_knob_is_a_typed_field_of_the_typescript_refresh_config() {
    for knob in refresh_knobs() {
        let mut ty = "RefreshConfig".to_string();
        for key in knob.path.split('.') {
            let body = declaration(&ty);
            ty = field_type(&body, key).unwrap_or_else(|| panic!("{}: `{key}` is not a field of TS {ty}", knob.path));
        }
        match knob.kind {
            KnobKind::Choice { choices } => {
                let body = declaration(&ty);
                for c in choices {
                    let param =
                        field_type(&body, c.name).unwrap_or_else(|| panic!("{}: no `{}` in {ty}", knob.path, c.name));
                    if let Some(p) = c.param {
                        assert_eq!(param, ts_type_of(p), "{}.{}", knob.path, c.name);
                    }
                }
            }
            kind => assert_eq!(ty, ts_type_of(kind), "{}: TS type", knob.path),
        }
    }
}

#[test]
fn every_field_of_the_typescript_refresh_config_is_a_knob() {
    // Walk the TS declarations reachable from RefreshConfig; each field path must be a knob,
    // on the way to one, or a choice's variant.
    fn walk(ty: &str, path: &str, out: &mut Vec<String>) {
        if matches!(ty, "Duration" | "number" | "boolean") {
            return;
        }
        let body = declaration(ty);
        let fields: Vec<(&str, &str)> = body
            .split(['{', ';', '|', '}'])
            .filter_map(|part| {
                let part = part.trim();
                let (name, rest) = part.split_once(':')?;
                let name = name.trim();
                (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_')).then(|| {
                    (name, rest.trim().split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or(""))
                })
            })
            .collect();
        for (name, child) in fields {
            let full = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
            let known = refresh_knobs().any(|k| k.path == full || k.path.starts_with(&format!("{full}.")))
                || refresh_knobs()
                    .any(|k| matches!(k.kind, KnobKind::Choice { .. }) && full.starts_with(&format!("{}.", k.path)));
            if !known {
                out.push(full.clone());
            }
            walk(child, &full, out);
        }
    }
    let mut stale = Vec::new();
    walk("RefreshConfig", "", &mut stale);
    assert!(stale.is_empty(), "TS fields that are no knob of the core: {stale:?}");
}
