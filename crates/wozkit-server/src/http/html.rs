//! HTML building blocks. Every piece of text that did not come from this file (study text,
//! participant text, ids) goes through [`esc`]; pages carry no inline scripts or styles, so the
//! Content-Security-Policy can forbid both.

use wozkit_core::language::Language;

pub use wozkit_core::html::esc;

/// Plain text as paragraphs: blank lines separate paragraphs, single newlines are kept as
/// spaces (study files wrap long lines).
pub fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            format!(
                "<p>{}</p>",
                esc(&p.split_whitespace().collect::<Vec<_>>().join(" "))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Markdown from a study file as HTML. Raw HTML in it is shown as text, and links and images
/// keep only web, mail and relative addresses, so a study text cannot run script.
pub fn markdown(text: &str) -> String {
    use pulldown_cmark::{CowStr, Event, Options, Parser, Tag};
    let safe = |url: &CowStr<'_>| {
        let u = url.trim().to_ascii_lowercase();
        u.starts_with("https://")
            || u.starts_with("http://")
            || u.starts_with("mailto:")
            || !(u.contains(':'))
    };
    let events = Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES).map(
        |event| match event {
            Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) if !safe(&dest_url) => Event::Start(Tag::Link {
                link_type,
                dest_url: CowStr::Borrowed("#"),
                title,
                id,
            }),
            Event::Start(Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            }) if !safe(&dest_url) => Event::Start(Tag::Image {
                link_type,
                dest_url: CowStr::Borrowed("#"),
                title,
                id,
            }),
            other => other,
        },
    );
    let mut out = String::new();
    pulldown_cmark::html::push_html(&mut out, events);
    out
}

/// A whole page: `body` is trusted HTML built with [`esc`]; `scripts` are asset names.
pub fn layout(title: &str, body: &str, scripts: &[&str]) -> String {
    layout_with_head(title, "", body, scripts)
}

/// A whole page with extra trusted `<head>` markup (e.g. a timed redirect).
pub fn layout_with_head(title: &str, head: &str, body: &str, scripts: &[&str]) -> String {
    layout_in(Language::En, title, head, body, scripts)
}

/// A whole page in `lang` (a participant page of a study, in the study's `language:`), marked
/// with its tag so browsers, screen readers and fonts treat the text as that language.
pub fn layout_in(lang: Language, title: &str, head: &str, body: &str, scripts: &[&str]) -> String {
    let scripts: String = scripts
        .iter()
        .map(|s| {
            format!(
                "<script type=\"module\" src=\"/assets/{}\"></script>",
                esc(s)
            )
        })
        .collect();
    format!(
        "<!doctype html>\n<html lang=\"{}\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/assets/style.css\">{head}</head>\
         <body>{body}{scripts}</body></html>",
        lang.tag(),
        esc(title)
    )
}

/// Percent-encodes a URL path (keeps `/` and unreserved characters).
pub fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a query value.
pub fn query_escape(s: &str) -> String {
    path_escape(s).replace('/', "%2F")
}

/// URL of a study's media file.
pub fn media_url(study: &str, file: &str) -> String {
    format!("/study/{}/{}", query_escape(study), path_escape(file))
}

/// A form that posts to `action` with a hidden `step` and one submit button.
pub fn button_form(action: &str, step: &str, button_id: &str, label: &str) -> String {
    format!(
        "<form method=\"post\" action=\"{}\"><input type=\"hidden\" name=\"step\" value=\"{}\">\
         <button type=\"submit\" id=\"{}\" data-testid=\"{}\" class=\"primary\">{}</button></form>",
        esc(action),
        esc(step),
        esc(button_id),
        esc(button_id),
        esc(label)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_are_escaped_and_joined() {
        assert_eq!(paragraphs("a\nb\n\n<c>"), "<p>a b</p>\n<p>&lt;c&gt;</p>");
    }

    #[test]
    fn urls_are_encoded() {
        assert_eq!(media_url("s", "media/a b.gif"), "/study/s/media/a%20b.gif");
        assert_eq!(query_escape("a/b&c"), "a%2Fb%26c");
    }
}
