//! The house as it is left: reads `src/` and fails on a file over 400 lines, a
//! function over 100 lines, a circle of imports between files, a product room that names a
//! tool, the server or a tool that names the command line, or a glob import outside tests. Cheaper than a review, and it says exactly where.
//!
//! A file's lines are its product's, wherever its `#[cfg(test)]` items stand (files named
//! `tests.rs` or `*_tests.rs`, and those declared `#[cfg(test)] mod name;`, are test files). An import is any path a file names: `use` trees,
//! `crate::`, `super::` and `self::` paths in the code, and a child module's items; it points at
//! the file that holds the module the path reaches. A folder's `mod.rs` (and `lib.rs` for the
//! crate) is the face of its folder: what it declares and re-exports of its own rooms is not an
//! import of theirs, and so the rooms may use their face. A path to an item a module re-exports
//! (`pub use`) is followed to the file that defines it, so a re-export hides no circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 400;
const MAX_FN_LINES: usize = 100;
const MAX_METHODS: usize = 50;

/// The source with comments, string and char literals blanked (newlines kept), so that braces
/// and paths are read from code only.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
            && {
                let mut j = i + if c == 'b' { 2 } else { 1 };
                while b.get(j) == Some(&'#') {
                    j += 1;
                }
                b.get(j) == Some(&'"')
            }
        {
            // a raw string: r"..." or r#"..."#
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while b[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // a char literal ('a', '\n', '\u{1F600}'), not a lifetime ('a)
            let lit_end = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match lit_end {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The byte spans of a code's `#[cfg(test)]` items, each from its attribute to its matching `}`
/// (or its `;` when it has no body), wherever they stand in the file.
fn test_spans(code: &str) -> Vec<(usize, usize)> {
    const ATTR: &str = "#[cfg(test)]";
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(ATTR).map(|a| a + from) {
        let mut depth = 0i32;
        let mut end = code.len();
        for (i, c) in code[at + ATTR.len()..].char_indices() {
            let i = at + ATTR.len() + i;
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        spans.push((at, end));
        from = end;
    }
    spans
}

/// The product's part of a file's code: every `#[cfg(test)]` item blanked (newlines kept, so
/// line numbers still point into the file), wherever it stands.
fn product_part(code: &str) -> String {
    let mut out = code.to_string();
    for (start, end) in test_spans(code) {
        let blank: String = code[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blank);
    }
    out
}

/// The lines of a file outside its `#[cfg(test)]` items: what a reader of the product reads.
fn product_lines(text: &str) -> usize {
    let code = code_only(text);
    let line_of = |pos: usize| code[..pos].matches('\n').count();
    let tested: usize = test_spans(&code)
        .into_iter()
        .map(|(s, e)| line_of(e) - line_of(s) + 1)
        .sum();
    text.lines().count() - tested
}

/// The files that are test modules: named `tests.rs` or `*_tests.rs`, or declared by their
/// parent as `#[cfg(test)] mod name;`.
fn test_modules(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(f).unwrap();
        let dir = if matches!(f.file_name().unwrap().to_str(), Some("mod.rs" | "lib.rs")) {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let item = rest.trim_start();
            let decl = item
                .strip_prefix("pub(crate) mod ")
                .or_else(|| item.strip_prefix("mod "))
                .and_then(|m| m.split_once(';'))
                .map(|(name, _)| name.trim());
            if let Some(name) = decl.filter(|n| is_ident(n)) {
                for candidate in [
                    dir.join(format!("{name}.rs")),
                    dir.join(name).join("mod.rs"),
                ] {
                    if candidate.exists() {
                        out.insert(candidate);
                    }
                }
            }
        }
    }
    out
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().unwrap().to_string_lossy();
    name == "tests.rs" || name.ends_with("_tests.rs")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A file's module path: `src/store/sql.rs` is `store::sql`, `src/store/mod.rs` is `store`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The file that holds a module, if it is one of the crate's.
fn file_of(src: &Path, module: &[String]) -> Option<PathBuf> {
    if module.is_empty() {
        return Some(src.join("lib.rs"));
    }
    let base: PathBuf = module.iter().collect();
    let file = src.join(&base).with_extension("rs");
    if file.exists() {
        return Some(file);
    }
    let facade = src.join(&base).join("mod.rs");
    facade.exists().then_some(facade)
}

/// What each module re-exports: (module, name) -> the path it stands for (`pub use a::B;` in
/// `m` maps `(m, B)` to `m::a::B`; `pub use a::B as C;` maps `(m, C)`).
type Reexports = BTreeMap<(Vec<String>, String), Vec<String>>;

fn reexports(src: &Path, files: &[PathBuf]) -> Reexports {
    let mut out = Reexports::new();
    for file in files {
        let module = module_of(src, file);
        let code = product_part(&code_only(&std::fs::read_to_string(file).unwrap()));
        let children: BTreeSet<String> = files
            .iter()
            .map(|f| module_of(src, f))
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(&module))
            .map(|m| m.last().unwrap().clone())
            .collect();
        let tokens = tokenize(&code);
        let mut i = 0;
        while i < tokens.len() {
            let public = tokens[i] == "pub";
            if !public {
                i += 1;
                continue;
            }
            // pub use, pub(crate) use, pub(super) use
            let mut j = i + 1;
            if tokens.get(j) == Some(&"(") {
                while j < tokens.len() && tokens[j] != ")" {
                    j += 1;
                }
                j += 1;
            }
            if tokens.get(j) != Some(&"use") {
                i += 1;
                continue;
            }
            let end = (j..tokens.len())
                .find(|&k| tokens[k] == ";")
                .unwrap_or(tokens.len());
            let statement: Vec<&str> = tokens[j + 1..end].to_vec();
            let text = statement.join(" ").replace(" :: ", "::");
            for (path, alias) in use_paths(&text) {
                let abs = absolute(&path, &module, &children);
                if let (Some(abs), Some(name)) = (abs, alias.or_else(|| path.last().cloned()))
                    && name != "*"
                    && name != "self"
                {
                    out.insert((module.clone(), name), abs);
                }
            }
            i = end;
        }
    }
    out
}

/// The paths of a `use` tree's text (`a::{b, c::D as E}`), each with its alias.
fn use_paths(text: &str) -> Vec<(Vec<String>, Option<String>)> {
    fn walk(text: &str, base: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
        let text = text.trim();
        if let Some(open) = text.find('{') {
            let prefix: Vec<String> = text[..open]
                .trim_end_matches("::")
                .split("::")
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().to_string())
                .collect();
            let mut b = base.to_vec();
            b.extend(prefix);
            let inner = &text[open + 1..text.rfind('}').unwrap_or(text.len())];
            let mut depth = 0;
            let mut start = 0;
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        walk(&inner[start..k], &b, out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            walk(&inner[start..], &b, out);
            return;
        }
        if text.is_empty() {
            return;
        }
        let (path, alias) = match text.split_once(" as ") {
            Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
            None => (text, None),
        };
        let mut b = base.to_vec();
        b.extend(path.split("::").map(|s| s.trim().to_string()));
        out.push((b, alias));
    }
    let mut out = Vec::new();
    walk(text, &[], &mut out);
    out
}

/// A use path made absolute from the module it is written in.
fn absolute(
    path: &[String],
    module: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => module[..module.len().saturating_sub(1)].to_vec(),
        child if children.contains(child) => {
            let mut m = module.to_vec();
            m.push(child.to_string());
            m
        }
        _ => return None,
    };
    let mut rest = &path[1..];
    while rest.first().map(String::as_str) == Some("super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file that holds what `path` names: the longest prefix of it that is a module of the
/// crate, followed through that module's re-exports to the file that defines the item.
fn resolve(src: &Path, path: &[String], re: &Reexports) -> Option<PathBuf> {
    let mut path = path.to_vec();
    for _ in 0..8 {
        let k = (0..=path.len())
            .rev()
            .find(|&k| file_of(src, &path[..k]).is_some() && (k > 0 || path.is_empty()))
            .unwrap_or(0);
        if let Some(name) = path.get(k)
            && let Some(target) = re.get(&(path[..k].to_vec(), name.clone()))
        {
            let mut next = target.clone();
            next.extend(path[k + 1..].iter().cloned());
            if next != path {
                path = next;
                continue;
            }
        }
        return file_of(src, &path[..k]);
    }
    file_of(src, &path)
}

/// The face (`mod.rs`) of a folder that holds `module`, where `path` names one of that
/// folder's re-exports and the face holds code of its own (more than its rooms' declarations
/// and re-exports): the room reaches its folder's item through a room that may use it back.
/// Not the crate's own `lib.rs`, whose re-exports are the crate's face.
fn through_own_face(
    src: &Path,
    module: &[String],
    path: &[String],
    re: &Reexports,
) -> Option<PathBuf> {
    let k = (1..=path.len())
        .rev()
        .find(|&k| file_of(src, &path[..k]).is_some())?;
    let folder = &path[..k];
    let inside = module.len() > folder.len() && module.starts_with(folder);
    let name = path.get(k)?;
    let face = file_of(src, folder)?;
    (inside && re.contains_key(&(folder.to_vec(), name.clone())) && holds_code(&face))
        .then_some(face)
}

/// Whether a file holds more than declarations of modules and `use`s (a face with code).
fn holds_code(file: &Path) -> bool {
    let code = product_part(&code_only(&std::fs::read_to_string(file).unwrap()));
    let mut rest = code.as_str();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            return false;
        }
        let item = rest
            .trim_start_matches("pub(crate) ")
            .trim_start_matches("pub(super) ");
        let item = item.trim_start_matches("pub ");
        if item.starts_with("mod ") || item.starts_with("use ") {
            rest = &rest[rest.find(';').map_or(rest.len(), |i| i + 1)..];
        } else if item.starts_with("#[") || item.starts_with("#![") {
            rest = &rest[rest.find(']').map_or(rest.len(), |i| i + 1)..];
        } else {
            return true;
        }
    }
}

/// Every path a file names, as absolute module paths (`crate::a::b`, `super::x`, `self::y`,
/// `use` trees with their groups, and the first segment of a path that is a child module).
fn named_paths(code: &str, module: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let tokens: Vec<&str> = tokenize(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        // a visibility (`pub(in crate::ledger)`) names where an item may be seen, not a use
        if t == "in" && i >= 2 && tokens[i - 1] == "(" && tokens[i - 2] == "pub" {
            i = (i..tokens.len())
                .find(|&k| tokens[k] == ")")
                .unwrap_or(tokens.len());
            continue;
        }
        let starts = matches!(t, "crate" | "super" | "self") || children.contains(t);
        let path_start =
            starts && tokens.get(i + 1) == Some(&"::") && !(i > 0 && tokens[i - 1] == "::");
        if !path_start {
            i += 1;
            continue;
        }
        let mut base: Vec<String> = match t {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => module[..module.len().saturating_sub(1)].to_vec(),
            child => {
                let mut m = module.to_vec();
                m.push(child.to_string());
                m
            }
        };
        i += 1;
        // more `super::` after the first
        while tokens.get(i) == Some(&"::") && tokens.get(i + 1) == Some(&"super") {
            base.pop();
            i += 2;
        }
        i = use_tree(&tokens, i, base, &mut out);
    }
    out
}

/// Reads `::seg::seg...` or `::{a, b::c, ...}` from `i` on `base`; pushes each full path.
fn use_tree(
    tokens: &[&str],
    mut i: usize,
    mut base: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    while tokens.get(i) == Some(&"::") {
        match tokens.get(i + 1) {
            Some(&"{") => {
                i += 2;
                loop {
                    match tokens.get(i) {
                        None => return i,
                        Some(&"}") => return i + 1,
                        Some(&",") => i += 1,
                        Some(&"self") => {
                            out.push(base.clone());
                            i += 1;
                        }
                        Some(seg) if is_ident(seg) => {
                            let mut b = base.clone();
                            b.push(seg.to_string());
                            i = use_tree(tokens, i + 1, b.clone(), out);
                            if !out.last().is_some_and(|l| l.starts_with(&b)) {
                                out.push(b);
                            }
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            Some(seg) if is_ident(seg) => {
                base.push(seg.to_string());
                i += 2;
            }
            _ => break,
        }
    }
    out.push(base);
    i
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && t.chars().all(|c| c.is_alphanumeric() || c == '_')
}

fn tokenize(code: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < bytes.len() && ((bytes[i] as char).is_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push(&code[start..i]);
        } else if c == ':' && bytes.get(i + 1) == Some(&b':') {
            out.push("::");
            i += 2;
        } else if c.is_whitespace() || !c.is_ascii() {
            i += 1;
        } else {
            out.push(&code[i..i + 1]);
            i += 1;
        }
    }
    out
}

/// Each function of a file whose body runs over the limit: (name, first line, lines).
fn long_functions(code: &str) -> Vec<(String, usize, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let line_at = |pos: usize| chars[..pos].iter().filter(|c| **c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < chars.len() {
        let is_fn = chars[i] == 'f'
            && chars[i + 1] == 'n'
            && chars[i + 2].is_whitespace()
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'));
        if !is_fn {
            i += 1;
            continue;
        }
        let name: String = chars[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        // the body: the first `{` outside parentheses, unless a `;` ends a declaration first
        let mut j = i + 2;
        let mut parens = 0i32;
        let open = loop {
            match chars.get(j) {
                None => break None,
                Some('(') => parens += 1,
                Some(')') => parens -= 1,
                Some(';') if parens == 0 => break None,
                Some('{') if parens == 0 => break Some(j),
                _ => {}
            }
            j += 1;
        };
        let Some(open) = open else {
            i += 2;
            continue;
        };
        let mut depth = 0;
        let mut k = open;
        while k < chars.len() {
            match chars[k] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        let (first, last) = (line_at(i), line_at(k.min(chars.len() - 1)));
        let lines = last - first + 1;
        if lines > MAX_FN_LINES {
            out.push((name, first, lines));
        }
        i += 2;
    }
    out
}

/// The methods of each inherent `impl` block of a file (not a trait's): (type, methods).
fn impl_methods(code: &str) -> Vec<(String, usize)> {
    let tokens = tokenize(code);
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        match tokens[i] {
            "{" => depth += 1,
            "}" => depth = depth.saturating_sub(1),
            // an `impl` block stands where an item starts (not `-> impl Trait`, `x: impl Trait`)
            "impl"
                if depth == 0
                    && (i == 0 || matches!(tokens[i - 1], "}" | ";" | "]" | "unsafe")) =>
            {
                // the impl's own generics, then the type's path up to its body
                let mut j = i + 1;
                if tokens.get(j) == Some(&"<") {
                    let mut angles = 0;
                    while j < tokens.len() {
                        match tokens[j] {
                            "<" => angles += 1,
                            ">" if tokens[j - 1] != "-" => angles -= 1,
                            _ => {}
                        }
                        j += 1;
                        if angles == 0 {
                            break;
                        }
                    }
                }
                // the type: the last name of its path, outside its generics
                let mut name = String::new();
                let mut k = j;
                let mut of_trait = false;
                let (mut angles, mut bounds) = (0, false);
                while k < tokens.len() && tokens[k] != "{" && tokens[k] != ";" {
                    match tokens[k] {
                        "<" => angles += 1,
                        ">" if tokens[k - 1] != "-" => angles -= 1,
                        "for" => of_trait = true,
                        "where" => bounds = true,
                        t if angles == 0 && !bounds && is_ident(t) => name = t.to_string(),
                        _ => {}
                    }
                    k += 1;
                }
                if tokens.get(k) != Some(&"{") {
                    i = k;
                    continue;
                }
                // the block: its `fn`s at its own depth
                let mut inner = 0usize;
                let mut methods = 0;
                let mut m = k;
                while m < tokens.len() {
                    match tokens[m] {
                        "{" => inner += 1,
                        "}" => {
                            inner -= 1;
                            if inner == 0 {
                                break;
                            }
                        }
                        "fn" if inner == 1 => methods += 1,
                        _ => {}
                    }
                    m += 1;
                }
                if !of_trait && is_ident(&name) {
                    out.push((name, methods));
                }
                i = m + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The circles among `edges`: each strongly connected set of more than one file (Tarjan).
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct T<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on: BTreeSet<&'a PathBuf>,
        next: usize,
        out: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a PathBuf) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let edges = t.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut set = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                set.push(w.clone());
                if w == v {
                    break;
                }
            }
            if set.len() > 1 {
                set.sort();
                t.out.push(set);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// Whether `face` is the crate's `lib.rs` naming a file of the crate: the crate's face, whose
/// declarations are not imports. Every folder's `mod.rs` is a room like any other: a circle
/// through it is a circle.
fn faces(src: &Path, face: &Path, to: &Path) -> bool {
    face.file_name().unwrap() == "lib.rs" && to.starts_with(src)
}

#[test]
fn the_house_keeps_its_shape() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = check(&src);
    assert!(
        problems.is_empty(),
        "the house has lost its shape ({} problems):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every way the house can lose its shape, found in a tree of `src/` written to break each.
#[test]
fn the_guard_names_each_deliberate_break() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "pub mod a;\npub mod b;\npub mod c;\npub mod d;\npub mod cli;\npub mod serve;\npub mod tools;\n",
    );
    // a re-export is followed to the file that defines the item: d uses c's Thing, which
    // c/inner.rs defines and which uses d, a circle even though c/mod.rs only re-exports it
    // a folder's mod.rs is a room: it uses its room, which uses what mod.rs defines
    write(
        "x/mod.rs",
        "mod room;\npub struct Shared;\npub fn go() { room::f() }\n",
    );
    write("x/room.rs", "use super::Shared;\npub fn f() {}\n");
    write("c/mod.rs", "mod inner;\npub use inner::Thing;\n");
    write("c/inner.rs", "use crate::d::Y;\npub struct Thing;\n");
    write("d.rs", "use crate::c::Thing;\npub struct Y;\n");
    write("a.rs", "use crate::b::Y;\npub struct X;\n");
    write("b.rs", "use crate::a::X;\npub struct Y;\n");
    write("cli/mod.rs", "pub fn run() {}\n");
    write("serve/mod.rs", "pub fn go() { crate::cli::run() }\n");
    write("tools/mod.rs", "pub fn sim() {}\n");
    write("domain.rs", "pub fn f() { crate::tools::sim() }\n");
    let body = "fn f() {}\n".repeat(450);
    write("big.rs", &format!("#[cfg(test)]\nmod tests {{}}\n{body}"));
    write(
        "serve/room.rs",
        "use super::*;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    );
    write(
        "long.rs",
        &format!("fn long() {{\n{}}}\n", "x();\n".repeat(120)),
    );
    let many: String = (0..51)
        .map(|n| format!("    fn m{n}(&self) {{}}\n"))
        .collect();
    write(
        "wide.rs",
        &format!(
            "pub struct Wide;\nimpl Wide {{\n{many}}}\nimpl Clone for Wide {{\n    fn clone(&self) -> Wide {{ Wide }}\n}}\n"
        ),
    );
    write(
        "e/mod.rs",
        "mod f;\npub struct Spread;\nimpl Spread {\n    fn one(&self) {}\n}\n",
    );
    write(
        "e/f/mod.rs",
        "impl<'a> super::Spread {\n    fn two(&self) {}\n}\n",
    );
    // a room that reaches its own folder's item through a face with code of its own imports the
    // face, which uses the room: a circle (as dispatch/http/answers.rs once named
    // `crate::dispatch::Endpoint`); through a face of declarations only, no circle
    write(
        "f/mod.rs",
        "mod work;\nmod answers;\npub use answers::Class;\npub fn run() { work::go() }\n",
    );
    write("f/work.rs", "use crate::f::Class;\npub fn go() {}\n");
    write("f/answers.rs", "pub struct Class;\n");
    write("g/mod.rs", "mod one;\nmod two;\npub use one::T;\n");
    write("g/one.rs", "pub struct T;\n");
    write("g/two.rs", "use crate::g::T;\n");
    // a visibility names where an item may be seen, not a use: no circle through `v/mod.rs`
    write("v/mod.rs", "mod room;\npub use room::g;\n");
    write("v/room.rs", "pub(in crate::v) fn g() {}\n");
    let problems = check(&src).join("\n");
    assert!(
        !problems.contains("src/v/"),
        "a visibility is not an import:\n{problems}"
    );
    assert!(
        !problems.contains("src/g/"),
        "a face of declarations only:\n{problems}"
    );
    assert!(
        !problems.contains("room.rs:4"),
        "a test module's glob is its own:\n{problems}"
    );
    for expected in [
        "a circle of imports: src/a.rs <-> src/b.rs",
        "a circle of imports: src/c/inner.rs <-> src/d.rs",
        "a circle of imports: src/x/mod.rs <-> src/x/room.rs",
        "a circle of imports: src/f/mod.rs <-> src/f/work.rs",
        "src/serve/mod.rs names the command line's cli/mod.rs",
        "src/domain.rs names the tool tools/mod.rs",
        "src/big.rs: 450 lines",
        "src/long.rs:1: fn long is 122 lines",
        "src/serve/room.rs:1: a glob import (use super::*;)",
        "type Wide (src) has 51 methods (at most 50)",
        "type Spread (src/e) has methods in src/e, src/e/f",
    ] {
        assert!(
            problems.contains(expected),
            "{expected} not in:\n{problems}"
        );
    }
}

/// What is wrong with the house under `src`, each named with its file.
fn check(src: &Path) -> Vec<String> {
    let src = src.to_path_buf();
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let tools = src.join("tools");
    let test_modules = test_modules(&files);
    let re = reexports(&src, &files);
    // each type's methods, and the folders they are written in
    let mut types: BTreeMap<String, (usize, BTreeSet<PathBuf>)> = BTreeMap::new();
    // where each type is defined: two types of one name in two folders are two types
    let mut defined: BTreeMap<String, BTreeSet<PathBuf>> = BTreeMap::new();
    for file in &files {
        let code = product_part(&code_only(&std::fs::read_to_string(file).unwrap()));
        let tokens = tokenize(&code);
        for w in tokens.windows(2) {
            if matches!(w[0], "struct" | "enum" | "trait" | "union") && is_ident(w[1]) {
                defined
                    .entry(w[1].to_string())
                    .or_default()
                    .insert(file.parent().unwrap().to_path_buf());
            }
        }
    }
    for file in files
        .iter()
        .filter(|f| !is_test_file(f) && !test_modules.contains(*f))
    {
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        let lines = product_lines(&text);
        if lines > MAX_FILE_LINES {
            problems.push(format!(
                "src/{rel}: {lines} lines (at most {MAX_FILE_LINES})"
            ));
        }
        let code = product_part(&code_only(&text));
        for (n, line) in code.lines().enumerate() {
            let line = line.trim();
            // an enum's variants (`use Outcome::*;` in a function) are not a module's contents
            let glob = line.trim_end_matches(';').strip_suffix("::*");
            let of_module = glob
                .and_then(|g| g.rsplit("::").next())
                .is_some_and(|last| last.starts_with(|c: char| c.is_lowercase()));
            if line.starts_with("use ") && of_module {
                problems.push(format!(
                    "src/{rel}:{}: a glob import ({line}): name what is used, so that a reader and this guard can follow it",
                    n + 1
                ));
            }
        }
        for (name, n) in impl_methods(&code) {
            let here = file.parent().unwrap().to_path_buf();
            let home = match defined.get(&name) {
                Some(homes) if homes.contains(&here) => here,
                Some(homes) if homes.len() == 1 => homes.iter().next().unwrap().clone(),
                _ => here,
            };
            let home = Path::new("src").join(home.strip_prefix(&src).unwrap());
            let name = format!(
                "{name} ({})",
                home.display().to_string().trim_end_matches('/')
            );
            let t = types.entry(name).or_default();
            t.0 += n;
            t.1.insert(
                file.parent()
                    .unwrap()
                    .strip_prefix(&src)
                    .unwrap()
                    .to_path_buf(),
            );
        }
        for (name, at, n) in long_functions(&code) {
            problems.push(format!(
                "src/{rel}:{at}: fn {name} is {n} lines (at most {MAX_FN_LINES})"
            ));
        }
        let module = module_of(&src, file);
        let children: BTreeSet<String> = files
            .iter()
            .filter(|f| {
                let m = module_of(&src, f);
                m.len() == module.len() + 1 && m.starts_with(&module) && *f != file
            })
            .map(|f| module_of(&src, f).last().unwrap().clone())
            .collect();
        let out = edges.entry(file.clone()).or_default();
        for path in named_paths(&code, &module, &children) {
            // a room that reaches an item of its own folder through the folder's face imports
            // the face (`crate::dispatch::Endpoint` from inside `dispatch/`)
            if let Some(face) = through_own_face(&src, &module, &path, &re) {
                if face != *file {
                    out.insert(face);
                }
                continue;
            }
            let Some(to) = resolve(&src, &path, &re) else {
                continue;
            };
            if to == *file {
                continue;
            }
            if to.starts_with(&tools)
                && !file.starts_with(&tools)
                && !file.starts_with(src.join("cli"))
                && !file.ends_with("lib.rs")
            {
                problems.push(format!(
                    "src/{rel} names the tool {}: only the command line and the tools may",
                    to.strip_prefix(&src).unwrap().display()
                ));
            }
            let cli = src.join("cli");
            if to.starts_with(&cli)
                && (file.starts_with(src.join("serve")) || file.starts_with(&tools))
            {
                problems.push(format!(
                    "src/{rel} names the command line's {}: the server and the tools stand apart from it",
                    to.strip_prefix(&src).unwrap().display()
                ));
            }
            if !faces(&src, file, &to) {
                out.insert(to);
            }
        }
    }
    for (name, (methods, folders)) in &types {
        if *methods > MAX_METHODS {
            problems.push(format!(
                "type {name} has {methods} methods (at most {MAX_METHODS}): split it by what it serves"
            ));
        }
        if folders.len() > 1 {
            let names: Vec<String> = folders
                .iter()
                .map(|f| format!("src/{}", f.display()))
                .collect();
            problems.push(format!(
                "type {name} has methods in {}: a type's methods live in one folder",
                names.join(", ")
            ));
        }
    }
    for circle in circles(&edges) {
        let names: Vec<String> = circle
            .iter()
            .map(|f| format!("src/{}", f.strip_prefix(&src).unwrap().display()))
            .collect();
        problems.push(format!("a circle of imports: {}", names.join(" <-> ")));
    }
    problems
}

/// The checker itself: it sees what it must and nothing it must not.
#[test]
fn the_checker_reads_code_not_text() {
    let code = code_only(
        "fn a() { let s = \"{ crate::x::y }\"; let c = '{'; // crate::z\n let r = r#\"}\"#; }\n\
         fn b<'a>(x: &'a str) -> &'a str { x }",
    );
    assert!(
        !code.contains("crate::x") && !code.contains("crate::z"),
        "{code}"
    );
    assert_eq!(
        code.matches('{').count(),
        code.matches('}').count(),
        "{code}"
    );
    let m = vec!["store".to_string(), "sql".to_string()];
    let children = BTreeSet::new();
    let paths = named_paths(
        "use super::{columns, sqlite::{self, X}}; use crate::domain::Op; super::super::lib_thing();",
        &m,
        &children,
    );
    let shown: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    for want in [
        "store::columns",
        "store::sqlite",
        "store::sqlite::X",
        "domain::Op",
        "lib_thing",
    ] {
        assert!(shown.iter().any(|s| s == want), "{want} in {shown:?}");
    }
    let long = format!("fn big() {{\n{}}}\nfn small() {{}}\n", "x();\n".repeat(120));
    let found = long_functions(&code_only(&long));
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].0.as_str(), found[0].2), ("big", 122));
}

/// A file's product lines are counted wherever its test items stand: a test module in the middle
/// hides nothing after it, and a test item's lines are not the product's.
#[test]
fn product_lines_are_counted_around_test_items_wherever_they_stand() {
    let body = "fn f() {}\n".repeat(300);
    let text = format!(
        "use x;\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn t() {{ let s = \"}}\"; }}\n}}\n{body}#[cfg(test)]\nuse y;\nfn last() {{}}\n"
    );
    // 1 + 300 + 1 product lines; the module's 4 lines and the test import's 2 are not
    assert_eq!(product_lines(&text), 302);
    let code = product_part(&code_only(&text));
    assert!(code.contains("fn last") && !code.contains("fn t()") && !code.contains("use y"));
    // as the old reading (up to the first test module) would have it: 2 lines, the rest hidden
    let over = format!(
        "use x;\n#[cfg(test)]\nmod tests {{}}\n{}",
        "fn f() {}\n".repeat(450)
    );
    assert!(
        product_lines(&over) > MAX_FILE_LINES,
        "{}",
        product_lines(&over)
    );
}

/// ARCHITECTURE.md is the map of the code: every folder under `src/` is on it, and every file is
/// named in its folder's `mod.rs` doc comment (its rooms), or on the map itself (the files at
/// `src/`'s top, and tests beside the code).
#[test]
fn every_file_under_src_is_on_the_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let src = root.join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut missing = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let folder = file.parent().unwrap();
        let on_map = if name == "mod.rs" {
            let here = folder.file_name().unwrap().to_string_lossy();
            map.contains(&format!("`src/{}/`", rel.trim_end_matches("/mod.rs")))
                || named_in_face(
                    &folder.parent().unwrap().join("mod.rs"),
                    &format!("{here}/"),
                )
        } else if folder == src {
            map.contains(&format!("`{name}`")) || map.contains(&format!("`src/{rel}`"))
        } else {
            is_test_file(file) || named_in_face(&folder.join("mod.rs"), &name)
        };
        if !on_map {
            missing.push(format!("src/{rel}"));
        }
    }
    assert!(
        missing.is_empty(),
        "files neither ARCHITECTURE.md nor their folder's mod.rs names: {missing:?}"
    );
}

/// Whether a `mod.rs` doc comment (its `//!` lines) names `name` in backticks.
fn named_in_face(face: &Path, name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(face) else {
        return false;
    };
    let doc: String = text
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join(" ");
    doc.contains(&format!("`{name}`"))
}

/// ARCHITECTURE.md stays a map a newcomer reads in minutes: under 2,000 words, every folder a
/// short paragraph, no line (a table's cell among them) longer than a screen's few lines.
#[test]
fn the_map_is_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let words = map.split_whitespace().count();
    assert!(
        words < 2000,
        "ARCHITECTURE.md has {words} words (fewer than 2,000)"
    );
    let long: Vec<_> = map
        .lines()
        .enumerate()
        .filter(|(_, l)| l.chars().count() > 400)
        .map(|(n, l)| format!("line {}: {} characters", n + 1, l.chars().count()))
        .collect();
    assert!(long.is_empty(), "ARCHITECTURE.md lines too long: {long:?}");
    let mut paragraph = 0;
    for line in map.lines() {
        let item = line.starts_with("- ")
            || line
                .split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        if line.trim().is_empty() || line.starts_with('#') || item {
            paragraph = 0;
        }
        paragraph += line.split_whitespace().count();
        assert!(
            paragraph <= 170,
            "ARCHITECTURE.md has a paragraph of more than 170 words, ending near: {line}"
        );
    }
}
