//! A URL fit to print (manual: Redaction): its password hidden and nothing else, so that the
//! user, the hosts, the port and the database a person needs stay readable. A password may hold
//! any character (`/`, `@`, `?` are common in generated ones), so the user-info is found by the
//! last `@` before the host, not by the first `/`.

use std::ops::Range;

/// What stands for a hidden password.
pub const HIDDEN: &str = "***";

/// One URL in a text: where it lies, its authority (user-info and hosts) and its password.
#[derive(Clone, Debug, PartialEq)]
pub struct UrlSpan {
    pub whole: Range<usize>,
    /// From after `://` to the end of the hosts: not an email address, whatever its `@` says.
    pub authority: Range<usize>,
    pub password: Option<Range<usize>>,
    /// The values of query parameters named `password` or `sslpassword` (libpq's).
    pub secret_params: Vec<Range<usize>>,
}

/// A character that ends a URL written in a sentence, a log line or a quoted argument.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')
}

fn is_host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '[' | ']' | '%' | ',')
}

/// Every `scheme://...` in `text`.
pub fn find_urls(text: &str) -> Vec<UrlSpan> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("://").map(|i| from + i) {
        let scheme_start = text[..i]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
            .last()
            .map_or(i, |(at, _)| at);
        let rest_start = i + 3;
        let end = text[rest_start..]
            .find(ends_url)
            .map_or(text.len(), |e| rest_start + e);
        from = end.max(rest_start);
        let scheme_ok = text[scheme_start..i]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic());
        if !scheme_ok {
            continue;
        }
        out.push(span(text, scheme_start, rest_start, end));
    }
    out
}

/// The parts of the URL at `text[start..end]`, its authority starting at `rest`.
fn span(text: &str, start: usize, rest: usize, end: usize) -> UrlSpan {
    let url = &text[rest..end];
    let host_end = |from: usize| {
        url[from..]
            .find(['/', '?', '#'])
            .map_or(url.len(), |e| from + e)
    };
    // the user-info ends at the last `@` that a plausible host follows; a user name holds no
    // `/`, `?` or `#`, so a `/` before it belongs to the password (after a `:`) or to a path
    let userinfo_end = url.rmatch_indices('@').map(|(at, _)| at).find(|&at| {
        let info = &url[..at];
        let host = &url[at + 1..host_end(at + 1)];
        let cut = info.find(['/', '?', '#']);
        let colon = info.find(':');
        !host.is_empty()
            && host.chars().all(is_host_char)
            && !info.ends_with('/')
            && match (cut, colon) {
                (None, _) => true,
                (Some(c), Some(k)) => k < c,
                (Some(_), None) => false,
            }
    });
    let (authority_end, password) = match userinfo_end {
        Some(at) => {
            let password = url[..at]
                .find(':')
                .filter(|k| k + 1 < at)
                .map(|k| rest + k + 1..rest + at);
            (host_end(at + 1), password)
        }
        None => (host_end(0), None),
    };
    let mut secret_params = Vec::new();
    if let Some(q) = url[authority_end..]
        .find('?')
        .map(|q| authority_end + q + 1)
    {
        let mut at = q;
        for pair in url[q..].split('&') {
            if let Some((name, value)) = pair.split_once('=') {
                let name = name.to_ascii_lowercase();
                if (name == "password" || name == "sslpassword") && !value.is_empty() {
                    let v = at + name.len() + 1;
                    let v_end = (v + value.len()).min(url.len());
                    let v_end = url[v..v_end].find('#').map_or(v_end, |h| v + h);
                    secret_params.push(rest + v..rest + v_end);
                }
            }
            at += pair.len() + 1;
        }
    }
    UrlSpan {
        whole: start..end,
        authority: rest..rest + authority_end,
        password,
        secret_params,
    }
}

/// `text` with the password of every URL in it hidden (and `password=` in their queries);
/// `None` when there was nothing to hide.
pub fn hide_passwords(text: &str) -> Option<String> {
    let mut hidden: Vec<Range<usize>> = find_urls(text)
        .into_iter()
        .flat_map(|u| u.password.into_iter().chain(u.secret_params))
        .collect();
    if hidden.is_empty() {
        return None;
    }
    hidden.sort_by_key(|r| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in hidden {
        if r.start < at {
            continue;
        }
        out.push_str(&text[at..r.start]);
        out.push_str(HIDDEN);
        at = r.end;
    }
    out.push_str(&text[at..]);
    Some(out)
}

/// Whether a URL is one of the servers settle itself is pointed at (a database, a mail server):
/// its user-info names an account there, never a person, so it is shown as written. Any other
/// URL's `user@host` is redacted as an address would be.
pub fn names_a_server(url: &str) -> bool {
    ["postgres://", "postgresql://", "smtp://", "smtps://"]
        .iter()
        .any(|s| url.len() >= s.len() && url[..s.len()].eq_ignore_ascii_case(s))
}

/// A URL fit to print: its password hidden, the rest as written.
pub fn shown_url(url: &str) -> String {
    hide_passwords(url).unwrap_or_else(|| url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_password_is_hidden_whatever_it_holds() {
        for (url, shown) in [
            (
                "postgres://settle:Zk9q/Vb7+x=@db.internal:5432/x",
                "postgres://settle:***@db.internal:5432/x",
            ),
            (
                "postgres://settle:a@b/c?d#e@db:5432/x",
                "postgres://settle:***@db:5432/x",
            ),
            (
                "postgres://settle@db.internal:5432/x",
                "postgres://settle@db.internal:5432/x",
            ),
            (
                "postgres://app:s3cret@h1:5432,h2:5433/settle?target_session_attrs=read-write",
                "postgres://app:***@h1:5432,h2:5433/settle?target_session_attrs=read-write",
            ),
            (
                "postgres://db/settle?password=s3cret&x=1",
                "postgres://db/settle?password=***&x=1",
            ),
            (
                "postgres://db/settle?sslmode=require&sslpassword=k/y",
                "postgres://db/settle?sslmode=require&sslpassword=***",
            ),
            ("sqlite://settle.db", "sqlite://settle.db"),
            (
                "sqlite:///var/lib/settle/a@b.db",
                "sqlite:///var/lib/settle/a@b.db",
            ),
            (
                "https://crm.example/users/@alice",
                "https://crm.example/users/@alice",
            ),
            (
                "https://crm.example/find?email=ada@example.com",
                "https://crm.example/find?email=ada@example.com",
            ),
            ("postgres://u:@h/x", "postgres://u:@h/x"),
        ] {
            assert_eq!(shown_url(url), shown, "{url}");
        }
    }

    #[test]
    fn urls_in_a_sentence_are_found_and_end_where_the_sentence_goes_on() {
        let text = "cannot open database 'postgres://a:p/w@h/x': refused; see http://doc/x";
        let urls = find_urls(text);
        assert_eq!(urls.len(), 2);
        assert_eq!(&text[urls[0].whole.clone()], "postgres://a:p/w@h/x");
        assert_eq!(&text[urls[0].authority.clone()], "a:p/w@h");
        assert_eq!(&text[urls[0].password.clone().unwrap()], "p/w");
        assert_eq!(
            hide_passwords(text).unwrap(),
            "cannot open database 'postgres://a:***@h/x': refused; see http://doc/x"
        );
        assert!(hide_passwords("no url here: a://").is_none());
        assert!(find_urls("://x").is_empty(), "a scheme is needed");
    }
}
