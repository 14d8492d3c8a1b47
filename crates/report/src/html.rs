//! A self-contained HTML page: inline CSS and inline SVG, no script, no external asset, so that one file can be
//! mailed, archived or opened offline years later and still show everything.

/// The page's style sheet (inlined in `<head>`).
const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;\
padding:0 1em;color:#1b1b1b;line-height:1.45}h1{font-size:1.7em;border-bottom:2px solid #0072b2;padding-bottom:.2em}\
h2{font-size:1.3em;margin-top:1.8em}h3{font-size:1.1em}table{border-collapse:collapse;margin:.8em 0;font-size:.92em}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;font-variant-numeric:tabular-nums}\
th{background:#f2f6fa}td:first-child,th:first-child{text-align:left}table.kv td{text-align:left}\
table.kv td:first-child{font-weight:600;background:#f7f9fb}pre{background:#f7f7f7;padding:.8em;\
overflow-x:auto;font-size:.88em}.note{border-left:4px solid #0072b2;background:#eef5fb;padding:.5em .8em;margin:.8em 0}\
.warn{border-left:4px solid #d55e00;background:#fdf0e8;padding:.5em .8em;margin:.8em 0}figure{margin:1em 0}\
figure svg{max-width:100%;height:auto;border:1px solid #eee}figcaption{font-size:.9em;color:#555}";

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Builds one page, section by section. All text is escaped; only SVG from [`crate::chart`] is inlined as is.
#[derive(Debug, Clone)]
pub struct HtmlPage {
    title: String,
    body: String,
}

impl HtmlPage {
    /// A page with a title (also its first heading).
    pub fn new(title: &str) -> Self {
        Self { title: title.to_string(), body: format!("<h1>{}</h1>\n", escape(title)) }
    }

    /// A heading (level 2 or 3).
    pub fn heading(&mut self, level: u8, text: &str) -> &mut Self {
        let level = level.clamp(2, 4);
        self.body.push_str(&format!("<h{level}>{}</h{level}>\n", escape(text)));
        self
    }

    /// A paragraph.
    pub fn paragraph(&mut self, text: &str) -> &mut Self {
        self.body.push_str(&format!("<p>{}</p>\n", escape(text)));
        self
    }

    /// A highlighted note.
    pub fn note(&mut self, text: &str) -> &mut Self {
        self.body.push_str(&format!("<div class=\"note\">{}</div>\n", escape(text)));
        self
    }

    /// A warning (repetitions that disagree, a buffer on the wrong node).
    pub fn warning(&mut self, text: &str) -> &mut Self {
        self.body.push_str(&format!("<div class=\"warn\">{}</div>\n", escape(text)));
        self
    }

    /// Preformatted text (a table as the terminal shows it, a command line).
    pub fn preformatted(&mut self, text: &str) -> &mut Self {
        self.body.push_str(&format!("<pre>{}</pre>\n", escape(text)));
        self
    }

    /// A table: the first row is the header.
    pub fn table(&mut self, rows: &[Vec<String>]) -> &mut Self {
        self.body.push_str("<table>\n");
        for (i, row) in rows.iter().enumerate() {
            let cell = if i == 0 { "th" } else { "td" };
            self.body.push_str("<tr>");
            for value in row {
                self.body.push_str(&format!("<{cell}>{}</{cell}>", escape(value)));
            }
            self.body.push_str("</tr>\n");
        }
        self.body.push_str("</table>\n");
        self
    }

    /// A two-column table of labels and values, left-aligned, without a header (the machine block).
    pub fn key_values(&mut self, rows: &[(String, String)]) -> &mut Self {
        self.body.push_str("<table class=\"kv\">\n");
        for (key, value) in rows {
            self.body.push_str(&format!("<tr><td>{}</td><td>{}</td></tr>\n", escape(key), escape(value)));
        }
        self.body.push_str("</table>\n");
        self
    }

    /// An inline SVG chart with a caption. The SVG must come from [`crate::chart`] (it is not escaped).
    pub fn figure(&mut self, svg: &str, caption: &str) -> &mut Self {
        // Drop any XML declaration: inside HTML the <svg> element stands alone.
        let svg = svg.trim_start();
        let svg = if svg.starts_with("<?xml") { svg.split_once("?>").map_or(svg, |(_, rest)| rest) } else { svg };
        self.body.push_str(&format!("<figure>{svg}<figcaption>{}</figcaption></figure>\n", escape(caption)));
        self
    }

    /// A bulleted list of sentences.
    pub fn list(&mut self, items: &[String]) -> &mut Self {
        self.body.push_str("<ul>\n");
        for item in items {
            self.body.push_str(&format!("<li>{}</li>\n", escape(item)));
        }
        self.body.push_str("</ul>\n");
        self
    }

    /// A list of links to files written beside the page (relative paths).
    pub fn file_list(&mut self, files: &[String]) -> &mut Self {
        self.body.push_str("<ul>\n");
        for file in files {
            let file = escape(file);
            self.body.push_str(&format!("<li><a href=\"{file}\">{file}</a></li>\n"));
        }
        self.body.push_str("</ul>\n");
        self
    }

    /// The whole document.
    pub fn finish(&self) -> String {
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
            escape(&self.title),
            self.body
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_the_page_is_self_contained() {
        let mut page = HtmlPage::new("Probe <report>");
        page.key_values(&[("CPU".into(), "<x>".into())]);
        page.paragraph("a < b & c")
            .table(&[vec!["x".into()], vec!["<1>".into()]])
            .figure("<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"></svg>", "caption");
        let html = page.finish();
        assert!(html.contains("<title>Probe &lt;report&gt;</title>"));
        assert!(html.contains("a &lt; b &amp; c"));
        assert!(html.contains("<td>&lt;1&gt;</td>"));
        assert!(html.contains("<table class=\"kv\">\n<tr><td>CPU</td><td>&lt;x&gt;</td></tr>"));
        assert!(html.contains("<figure><svg"), "the XML declaration is dropped");
        for external in ["<script", "<link", "src=\"http", "href=\"http", "@import"] {
            assert!(!html.contains(external), "{external}");
        }
    }
}
