//! Every request settle sends out, to a destination, its lookup or a channel: one kind of
//! client, which follows no redirect. A redirect is an answer: the dispatcher and the gateway
//! classify it (manual: Destinations and the dispatcher), a lookup takes it for no answer, a
//! channel's try fails on it. Followed, a 302 turns a POST into a GET whose 200 reads as done,
//! and a 307 sends the body and the configured headers to a host nobody configured.

/// A client that follows no redirect.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        // the conditions of `reqwest::Client::new()`'s own panic: no TLS backend or resolver
        .expect("the HTTP client could not start (TLS or the resolver)")
}

/// Where a shown `Location` points, its scheme and host only (its path may carry a request's
/// values or a webhook's secret).
pub fn origin(location: &str) -> &str {
    match location.find("://") {
        Some(i) => location[i + 3..]
            .find(['/', '?', '#'])
            .map_or(location, |e| &location[..i + 3 + e]),
        None => "elsewhere",
    }
}

/// A redirect's `Location`, fit to keep beside an answer: the URL's password and query hidden
/// (a query often carries a token), at most 200 characters, on one line.
pub fn location(value: Option<&reqwest::header::HeaderValue>) -> String {
    let Some(text) = value.and_then(|v| v.to_str().ok()) else {
        return "no Location".into();
    };
    let shown = crate::domain::url::shown_url(text);
    let shown = match shown.split_once('?') {
        Some((base, _)) => format!("{base}?…"),
        None => shown,
    };
    let shown = crate::domain::escape_text(&shown).into_owned();
    match shown.chars().count() > 200 {
        true => format!("{}…", shown.chars().take(200).collect::<String>()),
        false => shown,
    }
}
