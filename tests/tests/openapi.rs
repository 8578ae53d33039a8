//! `docs/admin-api.yaml` describes exactly the routes the admin listener serves: every
//! `.route("<path>", <methods>)` of `seed/src/admin.rs` (and of its submodules under
//! `seed/src/admin/`) is a path + method of the OpenAPI document, and every path + method of
//! the document is routed. Path parameters are compared by position, not by name.
//!
//! The bodies are checked too: a representative value of every `seedd_api` request and
//! response type (`openapi/samples.rs`) has exactly the fields, types and enum values of the
//! schema the document gives its route, and every JSON body the document describes has a type.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "openapi/samples.rs"]
mod samples;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Cargo's run-time value first: the compile-time one may name another checkout that built
/// into the same target dir.
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// `seed/src/admin.rs` and every `.rs` file under `seed/src/admin/`.
fn admin_sources() -> Vec<PathBuf> {
    let main = manifest_dir().join("../seed/src/admin.rs");
    assert!(main.is_file(), "{} is missing", main.display());
    let mut out = vec![main];
    let mut dirs = vec![manifest_dir().join("../seed/src/admin")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// A small Rust scanner: enough to find `.route("…", get(a).post(b))` calls in real code.

/// `src` without comments; string and char literals are kept as they are.
fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else {
            let end = literal_end(b, i)
                .unwrap_or_else(|| i + src[i..].chars().next().map_or(1, char::len_utf8));
            out.push_str(&src[i..end]);
            i = end;
        }
    }
    out
}

/// If a string, raw string or char literal starts at `i`, the index just past it.
fn literal_end(b: &[u8], i: usize) -> Option<usize> {
    let prev_ident = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
    match b[i] {
        b'"' => {
            let mut j = i + 1;
            while j < b.len() {
                match b[j] {
                    b'\\' => j += 2,
                    b'"' => return Some(j + 1),
                    _ => j += 1,
                }
            }
            Some(b.len())
        }
        b'r' if !prev_ident => {
            // r"…", r#"…"#, …
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j >= b.len() || b[j] != b'"' {
                return None;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = j + 1;
            let pos = b[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())?;
            Some(body + pos + close.len())
        }
        b'\'' => {
            // 'x' or '\n' / '\'' / '\u{…}'; anything else is a lifetime.
            if b.get(i + 1) == Some(&b'\\') {
                let close = b[i + 2..].iter().position(|&c| c == b'\'')?;
                Some(i + 2 + close + 1)
            } else {
                let c = std::str::from_utf8(&b[i + 1..]).ok()?.chars().next()?;
                let after = i + 1 + c.len_utf8();
                (b.get(after) == Some(&b'\'')).then_some(after + 1)
            }
        }
        _ => None,
    }
}

/// The index of the bracket closing the one at `open` (`(`, `[` or `{`), skipping literals.
fn matching(b: &[u8], open: usize) -> usize {
    let mut depth = 0;
    let mut i = open;
    while i < b.len() {
        if let Some(end) = literal_end(b, i) {
            i = end;
            continue;
        }
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    panic!("unbalanced brackets from byte {open}");
}

/// `src` without `#[cfg(test)] mod … { … }` blocks (their routers are not the daemon's).
fn strip_test_modules(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        if trimmed.starts_with("mod ") {
            let start = after.len() - trimmed.len();
            match trimmed.find(['{', ';']) {
                Some(k) if trimmed.as_bytes()[k] == b'{' => {
                    let close = matching(trimmed.as_bytes(), k);
                    rest = &after[start + close + 1..];
                }
                _ => rest = after,
            }
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The value of the string literal starting at `b[i]` (`"` or `r#"`).
fn string_value(src: &str, i: usize) -> Option<(String, usize)> {
    let b = src.as_bytes();
    let end = literal_end(b, i)?;
    let lit = &src[i..end];
    if let Some(raw) = lit.strip_prefix('r') {
        let hashes = raw.len() - raw.trim_start_matches('#').len();
        return Some((raw[hashes + 1..raw.len() - hashes - 1].to_owned(), end));
    }
    let inner = lit.strip_prefix('"')?.strip_suffix('"')?;
    // Route paths need no escapes beyond these.
    let value = inner.replace("\\\"", "\"").replace("\\\\", "\\");
    Some((value, end))
}

/// Every `(path, METHOD)` of `.route("path", get(a).post(b))` calls in `src`.
fn routes_in(src: &str, file: &str) -> Vec<(String, String)> {
    let src = strip_test_modules(&strip_comments(src));
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = src[from..].find(".route(") {
        let open = from + k + ".route".len();
        let close = matching(b, open);
        from = open + 1;
        let mut i = open + 1;
        while b[i].is_ascii_whitespace() {
            i += 1;
        }
        let Some((path, end)) = string_value(&src, i) else {
            panic!(
                "{file}: a .route( whose path is not a string literal: {}",
                &src[open..close.min(open + 80)]
            );
        };
        let mut i = end;
        while b[i].is_ascii_whitespace() {
            i += 1;
        }
        assert_eq!(b[i], b',', "{file}: .route({path:?} …: expected a comma");
        let methods = methods_in(&src[i + 1..close]);
        assert!(
            !methods.is_empty(),
            "{file}: .route({path:?}, …) has no get/post/put/delete/… method router: {}",
            src[i + 1..close].trim()
        );
        for m in methods {
            out.push((path.clone(), m));
        }
    }
    out
}

/// The HTTP methods of a method-router expression such as `get(a).post(b)` or
/// `axum::routing::delete(h)`: calls at the expression's top level whose name is a method
/// (`get_service(…)` counts as `get`). `any(…)` is refused: document its methods explicitly.
fn methods_in(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if let Some(end) = literal_end(b, i) {
            i = end;
            continue;
        }
        let c = b[i];
        if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let ident = &expr[start..i];
            let mut j = i;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if j < b.len() && b[j] == b'(' {
                assert_ne!(ident, "any", "route with any(…): list its methods instead");
                let name = ident.strip_suffix("_service").unwrap_or(ident);
                if METHODS.contains(&name) {
                    out.push(name.to_ascii_uppercase());
                }
                i = matching(b, j) + 1;
            }
            continue;
        }
        if matches!(c, b'(' | b'[' | b'{') {
            i = matching(b, i) + 1;
            continue;
        }
        i += 1;
    }
    out
}

/// `/api/v1/tenants/{name}/hosts/{host}` → `/api/v1/tenants/{}/hosts/{}`.
fn normalise(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_param = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_param = true;
                out.push_str("{}");
            }
            '}' => in_param = false,
            _ if in_param => {}
            _ => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------

fn openapi() -> serde_norway::Value {
    let path = manifest_dir().join("../docs/admin-api.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `(normalised path, METHOD)` → `(path as written, file)` of every route in the admin router.
fn routed() -> BTreeMap<(String, String), (String, String)> {
    let mut out = BTreeMap::new();
    for file in admin_sources() {
        let src = std::fs::read_to_string(&file).unwrap();
        let name = file
            .strip_prefix(manifest_dir().join(".."))
            .unwrap_or(&file)
            .display()
            .to_string();
        for (path, method) in routes_in(&src, &name) {
            out.insert((normalise(&path), method), (path, name.clone()));
        }
    }
    out
}

/// `(normalised path, METHOD)` → path as written, for every operation in the document.
fn documented(doc: &serde_norway::Value) -> BTreeMap<(String, String), String> {
    let paths = doc["paths"]
        .as_mapping()
        .expect("docs/admin-api.yaml has a `paths` mapping");
    let mut out = BTreeMap::new();
    for (path, item) in paths {
        let path = path.as_str().expect("path keys are strings");
        let item = item.as_mapping().expect("path items are mappings");
        for (key, _) in item {
            let key = key.as_str().unwrap_or_default();
            if METHODS.contains(&key) {
                out.insert((normalise(path), key.to_ascii_uppercase()), path.to_owned());
            }
        }
    }
    out
}

#[test]
fn every_admin_route_is_documented_and_every_documented_path_is_routed() {
    let routes = routed();
    assert!(
        routes.contains_key(&("/api/v1/status".to_owned(), "GET".to_owned())),
        "the route scanner found no GET /api/v1/status in seed/src/admin.rs: {routes:?}"
    );
    let doc = openapi();
    let documented = documented(&doc);

    let undocumented: Vec<String> = routes
        .iter()
        .filter(|(k, _)| !documented.contains_key(k))
        .map(|((_, m), (path, file))| format!("{m} {path} ({file})"))
        .collect();
    let unrouted: Vec<String> = documented
        .iter()
        .filter(|(k, _)| !routes.contains_key(k))
        .map(|((_, m), path)| format!("{m} {path}"))
        .collect();
    assert!(
        undocumented.is_empty() && unrouted.is_empty(),
        "docs/admin-api.yaml and the admin router disagree.\n\
         Routed but not in docs/admin-api.yaml:\n  {}\n\
         In docs/admin-api.yaml but not routed:\n  {}",
        if undocumented.is_empty() {
            "-".to_owned()
        } else {
            undocumented.join("\n  ")
        },
        if unrouted.is_empty() {
            "-".to_owned()
        } else {
            unrouted.join("\n  ")
        },
    );
}

/// Every documented operation declares its path parameters; the probes are documented
/// without authentication and everything else under the bearer scheme.
#[test]
fn openapi_document_is_consistent() {
    let doc = openapi();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"].as_str(),
        Some("bearer")
    );
    let global_bearer = doc["security"]
        .as_sequence()
        .is_some_and(|s| s.iter().any(|r| r.get("bearer").is_some()));
    assert!(
        global_bearer,
        "the document's default security is the bearer scheme"
    );

    let resolve = |p: &serde_norway::Value| -> serde_norway::Value {
        match p.get("$ref").and_then(|r| r.as_str()) {
            Some(r) => {
                let name = r
                    .strip_prefix("#/components/parameters/")
                    .unwrap_or_else(|| panic!("unexpected $ref {r}"));
                doc["components"]["parameters"][name].clone()
            }
            None => p.clone(),
        }
    };
    let mut problems = Vec::new();
    for (path, item) in doc["paths"].as_mapping().unwrap() {
        let path = path.as_str().unwrap();
        let wanted: BTreeSet<String> = path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_owned)
            .collect();
        for (method, op) in item.as_mapping().unwrap() {
            let method = method.as_str().unwrap();
            if !METHODS.contains(&method) {
                continue;
            }
            let mut declared = BTreeSet::new();
            for p in op["parameters"].as_sequence().into_iter().flatten() {
                let p = resolve(p);
                if p["in"].as_str() == Some("path") {
                    declared.insert(p["name"].as_str().unwrap().to_owned());
                }
            }
            if declared != wanted {
                problems.push(format!(
                    "{method} {path}: path parameters {declared:?}, expected {wanted:?}"
                ));
            }
            let public = op
                .get("security")
                .and_then(|s| s.as_sequence())
                .is_some_and(|s| s.is_empty());
            if public == path.starts_with("/api/") {
                problems.push(format!(
                    "{method} {path}: {}",
                    if public {
                        "the admin API needs the bearer token (drop `security: []`)"
                    } else {
                        "probes are unauthenticated (`security: []`)"
                    }
                ));
            }
            if op.get("responses").and_then(|r| r.as_mapping()).is_none() {
                problems.push(format!("{method} {path}: no responses"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The bodies: `seedd_api` types against the document's schemas.

/// The document as JSON (schemas are compared with serialised API values).
fn openapi_json() -> serde_json::Value {
    serde_json::to_value(openapi()).expect("the OpenAPI document converts to JSON")
}

/// Follows `$ref`s (`#/components/…`).
fn resolve<'a>(doc: &'a serde_json::Value, v: &'a serde_json::Value) -> &'a serde_json::Value {
    match v.get("$ref").and_then(|r| r.as_str()) {
        Some(r) => {
            let target = r
                .strip_prefix("#/")
                .unwrap_or_else(|| panic!("unexpected $ref {r}"))
                .split('/')
                .fold(doc, |at, seg| &at[seg]);
            assert!(!target.is_null(), "$ref {r} points nowhere");
            resolve(doc, target)
        }
        None => v,
    }
}

/// The JSON schema of an operation's request body (`status` None) or of one response.
fn body_schema<'a>(
    doc: &'a serde_json::Value,
    method: &str,
    path: &str,
    status: Option<&str>,
) -> Option<&'a serde_json::Value> {
    let op = &doc["paths"][path][method];
    let body = match status {
        None => resolve(doc, &op["requestBody"]),
        Some(s) => resolve(doc, &op["responses"][s]),
    };
    let schema = &body["content"]["application/json"]["schema"];
    (!schema.is_null()).then_some(schema)
}

/// Differences between `value` and `schema` (both directions for objects: a field the schema
/// does not list, and a listed property the value does not have).
fn compare(
    doc: &serde_json::Value,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    let schema = resolve(doc, schema);
    if let Some(alternatives) = schema.get("oneOf").and_then(Value::as_array) {
        let fits = alternatives.iter().any(|alt| {
            let mut problems = Vec::new();
            compare(doc, alt, value, at, &mut problems);
            problems.is_empty()
        });
        if !fits {
            out.push(format!("{at}: {value} matches none of the oneOf schemas"));
        }
        return;
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    let fits = types.is_empty()
        || types.contains(&kind)
        || (kind == "integer" && types.contains(&"number"));
    if !fits {
        out.push(format!("{at}: {kind} where the document says {types:?}"));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            out.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let Some(c) = schema.get("const") {
        if c != value {
            out.push(format!("{at}: {value} is not the constant {c}"));
        }
    }
    match value {
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    compare(doc, item, v, &format!("{at}[{i}]"), out);
                }
            }
        }
        Value::Object(fields) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties");
            for (k, v) in fields {
                let here = format!("{at}.{k}");
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(p), _) => compare(doc, p, v, &here, out),
                    (None, Some(Value::Bool(true))) => {}
                    (None, Some(e)) if e.is_object() => compare(doc, e, v, &here, out),
                    (None, _) if props.is_none() => {}
                    (None, _) => out.push(format!("{here}: in the type, not in the document")),
                }
            }
            for k in props.into_iter().flat_map(|p| p.keys()) {
                if !fields.contains_key(k) {
                    out.push(format!("{at}.{k}: in the document, not in the type"));
                }
            }
        }
        _ => {}
    }
}

#[test]
fn api_types_match_the_documented_bodies() {
    let doc = openapi_json();
    let mut problems = Vec::new();
    let mut covered = BTreeSet::new();
    for s in samples::all() {
        let what = match s.status {
            None => format!("{} {} request", s.method.to_uppercase(), s.path),
            Some(st) => format!("{} {} {st}", s.method.to_uppercase(), s.path),
        };
        match body_schema(&doc, s.method, s.path, s.status) {
            Some(schema) => compare(&doc, schema, &s.value, &what, &mut problems),
            None => problems.push(format!("{what}: the document has no JSON body here")),
        }
        covered.insert((s.method, s.path, s.status));
    }
    // Every JSON body the document describes under /api/v1 has an API type.
    for (path, item) in doc["paths"].as_object().unwrap() {
        if !path.starts_with("/api/") {
            continue;
        }
        for (method, op) in item.as_object().unwrap() {
            if !METHODS.contains(&method.as_str()) {
                continue;
            }
            let mut bodies = vec![None];
            bodies.extend(
                op["responses"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(st, _)| st.starts_with('2'))
                    .map(|(st, _)| Some(st.as_str())),
            );
            for status in bodies {
                if body_schema(&doc, method, path, status).is_none() {
                    continue;
                }
                let known = covered
                    .iter()
                    .any(|(m, p, st)| m == method && p == path && *st == status);
                if !known {
                    problems.push(format!(
                        "{} {path} {}: documented, but no seedd_api type is checked against it (tests/tests/openapi/samples.rs)",
                        method.to_uppercase(),
                        status.unwrap_or("request")
                    ));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "seedd_api and docs/admin-api.yaml disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// The scanner itself, on the shapes rustfmt gives route tables.
#[test]
fn route_scanner() {
    let src = r##"
        pub fn router() -> Router {
            let api = Router::new()
                .route("/api/v1/status", get(status))
                // .route("/api/v1/commented", get(nothing))
                /* .route("/api/v1/block", get(nothing)) */
                .route(
                    "/api/v1/tenants/{name}",
                    get(tenant).delete(tenant_delete),
                )
                .route("/api/v1/tenants", axum::routing::get(list).post(|b: Json<X>| async move { create(b, ")") }))
                .route(r#"/api/v1/raw/{id}"#, put(raw))
                .route("/healthz", get(|| async { "ok\n" }))
                .route_layer(middleware::from_fn(auth));
            let c = '"';
            Router::new().route("/metrics", get_service(svc)).merge(api)
        }
        #[cfg(test)]
        mod tests {
            fn t() { Router::new().route("/test-only", get(x)); }
        }
    "##;
    let got = routes_in(src, "test.rs");
    let want: Vec<(String, String)> = [
        ("/api/v1/status", "GET"),
        ("/api/v1/tenants/{name}", "GET"),
        ("/api/v1/tenants/{name}", "DELETE"),
        ("/api/v1/tenants", "GET"),
        ("/api/v1/tenants", "POST"),
        ("/api/v1/raw/{id}", "PUT"),
        ("/healthz", "GET"),
        ("/metrics", "GET"),
    ]
    .iter()
    .map(|(p, m)| (p.to_string(), m.to_string()))
    .collect();
    assert_eq!(got, want);
    assert_eq!(
        normalise("/api/v1/tenants/{name}/hosts/{host}"),
        "/api/v1/tenants/{}/hosts/{}"
    );
}
