//! CSV: one header row, then records; fields quoted only when they must be (RFC 4180).

/// Builds a CSV document.
#[derive(Debug, Clone, Default)]
pub struct Csv {
    text: String,
    columns: usize,
}

impl Csv {
    /// A document with this header.
    pub fn new<S: AsRef<str>>(header: &[S]) -> Self {
        let mut csv = Csv { text: String::new(), columns: header.len() };
        csv.push(header);
        csv
    }

    /// Appends a record.
    ///
    /// # Panics
    /// If the record has another number of fields than the header.
    pub fn row<S: AsRef<str>>(&mut self, fields: &[S]) -> &mut Self {
        assert_eq!(fields.len(), self.columns, "a CSV record must have as many fields as the header");
        self.push(fields);
        self
    }

    fn push<S: AsRef<str>>(&mut self, fields: &[S]) {
        let line: Vec<String> = fields.iter().map(|f| quote(f.as_ref())).collect();
        self.text.push_str(&line.join(","));
        self.text.push('\n');
    }

    /// The document.
    pub fn finish(&self) -> String {
        self.text.clone()
    }
}

/// A field, quoted when it holds a comma, a quote or a line break.
pub fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// A number for CSV: empty for none or non-finite values.
pub fn number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_needed() {
        let mut csv = Csv::new(&["domain", "node", "note"]);
        csv.row(&["node0", "1", "plain"]).row(&["node1", "0", "a, \"b\""]);
        assert_eq!(csv.finish(), "domain,node,note\nnode0,1,plain\nnode1,0,\"a, \"\"b\"\"\"\n");
        assert_eq!(number(Some(1.5)), "1.5");
        assert_eq!(number(Some(f64::NAN)), "");
        assert_eq!(number(None), "");
    }
}
