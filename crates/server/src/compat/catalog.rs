//! The catalog queries psql sends for `\d`, `\dt`, `\di`, `\dv`, `\dn` and `\l`, answered from numadb's catalog.
//!
//! A query is recognised by its shape (which catalog tables it joins) and read for what psql varies: the select
//! list, the relation kinds, the name and schema patterns (psql turns `\dt TBL*` into a regular expression),
//! whether only visible relations count, and the object id it asks about. Each select-list item is answered by
//! the first rule of its shape whose key appears in the item's text, so versions of psql that add or reorder
//! columns keep working; unknown items are NULL. Queries that only ask about features numadb lacks (policies,
//! publications, inheritance, rules, extended statistics) get empty answers.
//!
//! Relations: every table in schema `public` (kind `r`), its indexes (`i`), and the `numadb` system views
//! (`v`, in schema `numadb`, visible when `search_path` names it). Object ids come from [`super::Oids`].

use std::sync::{Arc, LazyLock};

use numadb_execution::ExecError;
use numadb_storage::{DataType, Index, IndexKind, Table, Value};
use regex::{Regex, RegexBuilder};

use super::CompatContext;
use crate::protocol::types::{Column, PgType};

/// Bytes a pattern's compiled regular expression may take (a client's pattern must not exhaust memory).
const PATTERN_BYTES_MAX: usize = 1 << 20;
/// numadb's schemas, as (name, oid, owner).
const SCHEMAS: [(&str, u32, &str); 2] = [("numadb", 16_383, "numadb"), ("public", 2200, "pg_database_owner")];
/// The owner shown for numadb's relations.
const OWNER: &str = "numadb";

/// Which catalog question a query asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `\dt`, `\d`, `\di`, `\dv` (with or without `+` and patterns): relations by kind.
    RelationList,
    /// `\d NAME`, first step: the relations a pattern names.
    RelationLookup,
    /// `\d NAME`: one relation's flags.
    RelationInfo,
    /// `\d NAME`: a relation's columns.
    Attributes,
    /// `\d TABLE`: its indexes.
    TableIndexes,
    /// `\d INDEX`: the index's flags and table.
    IndexInfo,
    /// `\d+ VIEW`: its definition.
    ViewDefinition,
    /// `\dn`.
    Namespaces,
    /// `\l`.
    Databases,
    /// Questions about features numadb lacks: always no rows.
    Empty,
}

fn pattern(text: &str) -> Regex {
    RegexBuilder::new(text).case_insensitive(true).build().expect("a valid built-in pattern")
}

static SHAPES: LazyLock<Vec<(Shape, Regex)>> = LazyLock::new(|| {
    vec![
        (Shape::RelationInfo, pattern(r"\bc\.relchecks\b")),
        (Shape::ViewDefinition, pattern(r"\bpg_get_viewdef\s*\(")),
        (Shape::IndexInfo, pattern(r"i\.indexrelid\s*=\s*c\.oid\s+and\s+c\.oid\s*=")),
        (Shape::TableIndexes, pattern(r"pg_catalog\.pg_class\s+c2\s*,\s*pg_catalog\.pg_index\s+i")),
        (Shape::Attributes, pattern(r"from\s+pg_catalog\.pg_attribute\s+a\b")),
        (
            Shape::Empty,
            pattern(
                r"from\s+pg_catalog\.(pg_policy|pg_statistic_ext|pg_publication|pg_inherits|pg_rewrite|pg_trigger|pg_constraint|pg_foreign_table|pg_partitioned_table|pg_sequence|pg_event_trigger)\b|pg_catalog\.pg_inherits\s+i\b",
            ),
        ),
        (Shape::RelationList, pattern(r#"(?s)\bas\s+"name".*\bfrom\s+pg_catalog\.pg_class\s+c\b"#)),
        (
            Shape::RelationLookup,
            pattern(r"^\s*select\s+c\.oid\s*,\s*n\.nspname\s*,\s*c\.relname\s+from\s+pg_catalog\.pg_class\s+c\b"),
        ),
        (Shape::Namespaces, pattern(r"from\s+pg_catalog\.pg_namespace\s+n\b")),
        (Shape::Databases, pattern(r"from\s+pg_catalog\.pg_database\s+d\b")),
    ]
});

static KINDS: LazyLock<Regex> = LazyLock::new(|| pattern(r"c\.relkind\s+in\s*\(([^)]*)\)"));
static NAME_PATTERN: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"c\.relname\s+operator\s*\(\s*pg_catalog\.~\s*\)\s*'((?:[^']|'')*)'"));
static SCHEMA_PATTERN: LazyLock<Regex> =
    LazyLock::new(|| pattern(r"n\.nspname\s+operator\s*\(\s*pg_catalog\.~\s*\)\s*'((?:[^']|'')*)'"));
static OID: LazyLock<Regex> = LazyLock::new(|| {
    pattern(
        r"(?:attrelid|c\.oid|relid|ev_class|conrelid|polrelid|inhrelid)\s*=\s*'(\d+)'|pg_get_viewdef\s*\(\s*'(\d+)'",
    )
});
static VISIBLE: LazyLock<Regex> = LazyLock::new(|| pattern(r"pg_table_is_visible\s*\(\s*c\.oid\s*\)"));

/// One select-list item: its column name, its alias as rules see it (lower-case, in quotes if quoted), and its
/// whole text (lower-case). Rules match the alias first, then the text.
#[derive(Debug, Clone)]
struct Item {
    name: String,
    alias: Option<String>,
    key: String,
}

/// A recognised catalog query.
pub struct CatalogQuery {
    shape: Shape,
    items: Vec<Item>,
    kinds: Option<Vec<char>>,
    name: Option<Regex>,
    schema: Option<Regex>,
    visible_only: bool,
    oid: Option<u32>,
}

/// Recognises a catalog query psql sends.
pub fn recognise(sql: &str) -> Option<CatalogQuery> {
    let shape = SHAPES.iter().find(|(_, p)| p.is_match(sql)).map(|(shape, _)| *shape)?;
    let items = select_items(sql)?;
    let literal = |regex: &Regex| -> Option<String> {
        regex.captures(sql).and_then(|c| c.get(1)).map(|m| m.as_str().replace("''", "'"))
    };
    // A pattern that does not compile matches nothing (psql then says it found no relation).
    let compile = |text: String| {
        RegexBuilder::new(&text)
            .size_limit(PATTERN_BYTES_MAX)
            .build()
            .unwrap_or_else(|_| Regex::new(r"[^\s\S]").expect("a valid built-in pattern"))
    };
    let name = literal(&NAME_PATTERN).map(compile);
    let schema = literal(&SCHEMA_PATTERN).map(compile);
    let kinds = KINDS.captures(sql).and_then(|c| c.get(1)).map(|m| {
        m.as_str().split(',').filter_map(|k| k.trim().trim_matches('\'').chars().next()).collect::<Vec<char>>()
    });
    let oid = OID.captures(sql).and_then(|c| c.get(1).or_else(|| c.get(2))).and_then(|m| m.as_str().parse().ok());
    Some(CatalogQuery { shape, items, kinds, name, schema, visible_only: VISIBLE.is_match(sql), oid })
}

/// The select list: items split at top-level commas, with their output names.
fn select_items(sql: &str) -> Option<Vec<Item>> {
    let trimmed = sql.trim_start();
    if !trimmed.get(..6)?.eq_ignore_ascii_case("select") {
        return None;
    }
    let body = &trimmed[6..];
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let mut quote: Option<char> = None;
    let bytes = body.as_bytes();
    let mut end = body.len();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '\'' | '"' => quote = Some(c),
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(item(&body[start..i]));
                    start = i + 1;
                }
                _ if depth == 0 && word_at(body, i, "from") => {
                    end = i;
                    break;
                }
                _ => {}
            },
        }
        i += 1;
    }
    items.push(item(&body[start..end]));
    Some(items)
}

/// Whether the keyword `word` starts at byte `i` of `text` (as a whole word).
fn word_at(text: &str, i: usize, word: &str) -> bool {
    let bytes = text.as_bytes();
    let before_ok = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_' || bytes[i - 1] == b'.');
    let after = i + word.len();
    before_ok
        && text.get(i..after).is_some_and(|w| w.eq_ignore_ascii_case(word))
        && bytes.get(after).is_none_or(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
}

fn item(text: &str) -> Item {
    let text = text.trim();
    let key = text.to_ascii_lowercase();
    // `… AS "Name"`, `… AS name`, or PostgreSQL's default: the last name before a call or in a column ref.
    let (name, alias) = if let Some(stripped) = text.strip_suffix('"') {
        match stripped.rfind('"') {
            Some(at) => {
                let alias = stripped[at + 1..].to_string();
                (Some(alias.clone()), Some(format!("\"{}\"", alias.to_ascii_lowercase())))
            }
            None => (None, None),
        }
    } else {
        let last = text.rsplit(|c: char| c.is_whitespace()).next().unwrap_or("");
        let before = text[..text.len() - last.len()].trim_end();
        let aliased = before.len() >= 2 && before[before.len() - 2..].eq_ignore_ascii_case("as");
        let alias = aliased.then(|| last.to_ascii_lowercase());
        (alias.clone(), alias)
    };
    let name = name.unwrap_or_else(|| {
        let head = text.split('(').next().unwrap_or(text).trim();
        let last = head.rsplit('.').next().unwrap_or(head);
        if !last.is_empty() && last.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            last.to_ascii_lowercase()
        } else {
            "?column?".to_string()
        }
    });
    Item { name, alias, key }
}

/// A relation numadb shows in the catalog.
struct Relation {
    oid: u32,
    schema: &'static str,
    name: String,
    kind: char,
    source: Source,
}

enum Source {
    Table(Arc<Table>),
    View,
    Index { table: Arc<Table>, index: Arc<Index> },
}

/// A column of a relation.
struct Attribute {
    name: String,
    data_type: DataType,
    nullable: bool,
}

impl Relation {
    fn attributes(&self, context: &CompatContext<'_>) -> Result<Vec<Attribute>, ExecError> {
        let of_table = |table: &Table| {
            table
                .columns()
                .iter()
                .map(|c| Attribute { name: c.name.clone(), data_type: c.data_type, nullable: c.nullable })
                .collect()
        };
        Ok(match &self.source {
            Source::Table(table) => of_table(table),
            Source::View => of_table(numadb_sql::system::view(context.db, "numadb", &self.name)?.as_ref()),
            Source::Index { table, index } => {
                let column = &table.columns()[index.column()];
                vec![Attribute { name: column.name.clone(), data_type: column.data_type, nullable: false }]
            }
        })
    }

    fn bytes(&self) -> Option<u64> {
        match &self.source {
            Source::Table(table) => {
                let (columns, _) = table.column_bytes();
                let indexes: u64 = table.snapshot().indexes.iter().map(|i| i.bytes()).sum();
                Some(columns.iter().sum::<u64>() + indexes)
            }
            Source::Index { index, .. } => Some(index.bytes()),
            Source::View => None,
        }
    }

    fn description(&self) -> Option<String> {
        match (&self.source, self.name.as_str()) {
            (Source::View, "nodes") => Some("NUMA nodes: CPUs, memory, distances".into()),
            (Source::View, "domains") => Some("scheduling domains at every granularity".into()),
            (Source::View, "tables") => Some("tables: rows, partitions, bytes, placement".into()),
            (Source::View, "placement") => Some("where every partition's pages are, per node".into()),
            (Source::View, "scheduler") => Some("scheduler counters per domain".into()),
            (Source::View, "queries") => Some("the last statements' tasks and byte matrices".into()),
            _ => None,
        }
    }

    fn visible(&self, context: &CompatContext<'_>) -> bool {
        self.schema == "public"
            || context
                .session
                .settings()
                .get("search_path")
                .is_ok_and(|path| path.split(',').any(|s| s.trim().trim_matches('"').eq_ignore_ascii_case(self.schema)))
    }
}

fn kind_name(kind: char) -> &'static str {
    match kind {
        'r' => "table",
        'v' => "view",
        'i' => "index",
        _ => "relation",
    }
}

fn index_method(kind: IndexKind) -> &'static str {
    kind.name()
}

/// Whether `index` is `table`'s primary key.
fn is_primary(table: &Table, index: &Index) -> bool {
    table.primary_index() == Some(index.name())
}

/// A name as SQL writes it: quoted unless it is a plain lower-case identifier.
fn quote_ident(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain { name.to_string() } else { format!("\"{}\"", name.replace('"', "\"\"")) }
}

fn index_definition(table: &Table, index: &Index) -> String {
    format!(
        "CREATE {}INDEX {} ON public.{} USING {} ({})",
        if index.is_unique() { "UNIQUE " } else { "" },
        quote_ident(index.name()),
        quote_ident(table.name()),
        index_method(index.kind()),
        quote_ident(&table.columns()[index.column()].name)
    )
}

/// PostgreSQL's `pg_size_pretty`.
pub fn size_pretty(bytes: u64) -> String {
    const LIMIT: i64 = 10 * 1024;
    const LIMIT2: i64 = LIMIT * 2 - 1;
    let half_rounded = |x: i64| (x + 1) / 2;
    let mut size = bytes as i64;
    if size < LIMIT {
        return format!("{size} bytes");
    }
    size /= 1 << 9;
    for unit in ["kB", "MB", "GB", "TB"] {
        if size < LIMIT2 {
            return format!("{} {unit}", half_rounded(size));
        }
        size /= 1 << 10;
    }
    format!("{} PB", half_rounded(size))
}

/// Every relation, in oid order.
fn relations(context: &CompatContext<'_>) -> Vec<Relation> {
    let mut relations = Vec::new();
    for table in context.db.catalog().tables() {
        let name = table.name().to_string();
        for index in table.snapshot().indexes {
            relations.push(Relation {
                oid: context.oids.of(&format!("index:{}", index.name())),
                schema: "public",
                name: index.name().to_string(),
                kind: 'i',
                source: Source::Index { table: Arc::clone(&table), index },
            });
        }
        relations.push(Relation {
            oid: context.oids.of(&format!("table:{name}")),
            schema: "public",
            name,
            kind: 'r',
            source: Source::Table(table),
        });
    }
    for view in numadb_sql::system::VIEWS {
        relations.push(Relation {
            oid: context.oids.of(&format!("view:numadb.{view}")),
            schema: "numadb",
            name: view.to_string(),
            kind: 'v',
            source: Source::View,
        });
    }
    relations.sort_by_key(|r| r.oid);
    relations
}

/// What a rule computes a value from.
enum Row<'a> {
    Relation(&'a Relation),
    Attribute(&'a Attribute),
    Index(&'a Table, &'a Index),
    Schema(&'static str, &'static str),
    Database,
}

type Rule = (&'static str, PgType, fn(&Row<'_>, &CompatContext<'_>) -> Value);

fn text(value: impl AsRef<str>) -> Value {
    Value::text(value.as_ref())
}

fn relation_rules() -> &'static [Rule] {
    &[
        // The list columns psql shows (matched by their aliases).
        ("\"schema\"", PgType::Name, |r, _| match r {
            Row::Relation(rel) => text(rel.schema),
            _ => Value::Null,
        }),
        ("\"name\"", PgType::Name, |r, _| match r {
            Row::Relation(rel) => text(&rel.name),
            _ => Value::Null,
        }),
        ("\"type\"", PgType::Text, |r, _| match r {
            Row::Relation(rel) => text(kind_name(rel.kind)),
            _ => Value::Null,
        }),
        ("\"owner\"", PgType::Name, |_, _| text(OWNER)),
        ("\"persistence\"", PgType::Text, |_, _| text("permanent")),
        ("\"access method\"", PgType::Name, |r, _| match r {
            Row::Relation(Relation { source: Source::Table(_), .. }) => text("numadb"),
            Row::Relation(Relation { source: Source::Index { index, .. }, .. }) => text(index_method(index.kind())),
            _ => Value::Null,
        }),
        ("\"size\"", PgType::Text, |r, _| match r {
            Row::Relation(rel) => rel.bytes().map_or(text("0 bytes"), |b| text(size_pretty(b))),
            _ => Value::Null,
        }),
        ("\"description\"", PgType::Text, |r, _| match r {
            Row::Relation(rel) => rel.description().map_or(Value::Null, text),
            _ => Value::Null,
        }),
        ("\"table\"", PgType::Name, |r, _| match r {
            Row::Relation(Relation { source: Source::Index { table, .. }, .. }) => text(table.name()),
            _ => Value::Null,
        }),
        // \d NAME's lookup and flags.
        ("c.oid", PgType::Oid, |r, _| match r {
            Row::Relation(rel) => Value::Int(i64::from(rel.oid)),
            _ => Value::Null,
        }),
        ("nspname", PgType::Name, |r, _| match r {
            Row::Relation(rel) => text(rel.schema),
            _ => Value::Null,
        }),
        ("relname", PgType::Name, |r, _| match r {
            Row::Relation(rel) => text(&rel.name),
            _ => Value::Null,
        }),
        ("relchecks", PgType::Int2, |_, _| Value::Int(0)),
        ("relkind", PgType::Char, |r, _| match r {
            Row::Relation(rel) => text(rel.kind.to_string()),
            _ => Value::Null,
        }),
        ("relhasindex", PgType::Bool, |r, _| match r {
            Row::Relation(Relation { source: Source::Table(table), .. }) => {
                Value::Bool(!table.snapshot().indexes.is_empty())
            }
            _ => Value::Bool(false),
        }),
        ("relhasrules", PgType::Bool, |_, _| Value::Bool(false)),
        ("relhastriggers", PgType::Bool, |_, _| Value::Bool(false)),
        ("relrowsecurity", PgType::Bool, |_, _| Value::Bool(false)),
        ("relforcerowsecurity", PgType::Bool, |_, _| Value::Bool(false)),
        ("relhasoids", PgType::Bool, |_, _| Value::Bool(false)),
        ("relispartition", PgType::Bool, |_, _| Value::Bool(false)),
        ("reloptions", PgType::Text, |_, _| text("")),
        ("reltablespace", PgType::Oid, |_, _| Value::Int(0)),
        ("reloftype", PgType::Text, |_, _| text("")),
        ("relpersistence", PgType::Char, |_, _| text("p")),
        ("relreplident", PgType::Char, |_, _| text("d")),
        ("amname", PgType::Name, |r, _| match r {
            Row::Relation(Relation { source: Source::Table(_), .. }) => text("numadb"),
            Row::Relation(Relation { source: Source::Index { index, .. }, .. }) => text(index_method(index.kind())),
            _ => Value::Null,
        }),
        ("''", PgType::Text, |_, _| text("")),
    ]
}

fn attribute_rules() -> &'static [Rule] {
    &[
        ("attname", PgType::Name, |r, _| match r {
            Row::Attribute(a) => text(&a.name),
            _ => Value::Null,
        }),
        ("format_type", PgType::Text, |r, _| match r {
            Row::Attribute(a) => text(a.data_type.sql_name()),
            _ => Value::Null,
        }),
        ("adbin", PgType::Text, |_, _| Value::Null),
        ("attnotnull", PgType::Bool, |r, _| match r {
            Row::Attribute(a) => Value::Bool(!a.nullable),
            _ => Value::Null,
        }),
        ("collname", PgType::Name, |_, _| Value::Null),
        ("attidentity", PgType::Char, |_, _| text("")),
        ("attgenerated", PgType::Char, |_, _| text("")),
        ("attstorage", PgType::Char, |r, _| match r {
            Row::Attribute(a) if a.data_type == DataType::Text => text("x"),
            _ => text("p"),
        }),
        ("attcompression", PgType::Char, |_, _| text("")),
        ("attstattarget", PgType::Int2, |_, _| Value::Null),
        ("col_description", PgType::Text, |_, _| Value::Null),
        ("is_key", PgType::Text, |_, _| text("yes")),
        ("pg_get_indexdef", PgType::Text, |r, _| match r {
            Row::Attribute(a) => text(quote_ident(&a.name)),
            _ => Value::Null,
        }),
    ]
}

fn index_rules() -> &'static [Rule] {
    &[
        // In \d TABLE's index list, c2 is the index (in \d INDEX's flags it is the table: see below).
        ("c2.relname", PgType::Name, |r, _| match r {
            Row::Index(_, index) => text(index.name()),
            _ => Value::Null,
        }),
        ("indisprimary", PgType::Bool, |r, _| match r {
            Row::Index(table, index) => Value::Bool(is_primary(table, index)),
            _ => Value::Null,
        }),
        ("indisunique", PgType::Bool, |r, _| match r {
            Row::Index(_, index) => Value::Bool(index.is_unique()),
            _ => Value::Null,
        }),
        ("indisclustered", PgType::Bool, |_, _| Value::Bool(false)),
        ("indisvalid", PgType::Bool, |_, _| Value::Bool(true)),
        ("pg_get_indexdef", PgType::Text, |r, _| match r {
            Row::Index(table, index) => text(index_definition(table, index)),
            _ => Value::Null,
        }),
        ("pg_get_constraintdef", PgType::Text, |r, _| match r {
            Row::Index(table, index) if is_primary(table, index) => {
                text(format!("PRIMARY KEY ({})", quote_ident(&table.columns()[index.column()].name)))
            }
            _ => Value::Null,
        }),
        ("contype", PgType::Char, |r, _| match r {
            Row::Index(table, index) if is_primary(table, index) => text("p"),
            _ => Value::Null,
        }),
        ("condeferrable", PgType::Bool, |_, _| Value::Bool(false)),
        ("condeferred", PgType::Bool, |_, _| Value::Bool(false)),
        ("indisreplident", PgType::Bool, |_, _| Value::Bool(false)),
        ("indnullsnotdistinct", PgType::Bool, |_, _| Value::Bool(false)),
        ("reltablespace", PgType::Oid, |_, _| Value::Int(0)),
        ("amname", PgType::Name, |r, _| match r {
            Row::Index(_, index) => text(index_method(index.kind())),
            _ => Value::Null,
        }),
        ("indpred", PgType::Text, |_, _| Value::Null),
    ]
}

fn index_info_rules() -> &'static [Rule] {
    &[("c2.relname", PgType::Name, |r, _| match r {
        Row::Index(table, _) => text(table.name()),
        _ => Value::Null,
    })]
}

fn schema_rules() -> &'static [Rule] {
    &[
        ("\"name\"", PgType::Name, |r, _| match r {
            Row::Schema(name, _) => text(name),
            _ => Value::Null,
        }),
        ("\"owner\"", PgType::Name, |r, _| match r {
            Row::Schema(_, owner) => text(owner),
            _ => Value::Null,
        }),
        ("\"description\"", PgType::Text, |r, _| match r {
            Row::Schema("numadb", _) => text("numadb's system views: the machine, placement, scheduler, queries"),
            Row::Schema(..) => text("standard public schema"),
            _ => Value::Null,
        }),
    ]
}

fn database_rules() -> &'static [Rule] {
    &[
        ("\"name\"", PgType::Name, |_, c| text(c.database)),
        ("\"owner\"", PgType::Name, |_, _| text(OWNER)),
        ("\"encoding\"", PgType::Name, |_, _| text("UTF8")),
        ("\"collate\"", PgType::Name, |_, _| text("C")),
        ("\"ctype\"", PgType::Name, |_, _| text("C")),
        ("\"locale provider\"", PgType::Text, |_, _| text("libc")),
        ("\"size\"", PgType::Text, |_, c| {
            let bytes: u64 = c.db.catalog().tables().iter().map(|t| t.column_bytes().0.iter().sum::<u64>()).sum();
            text(size_pretty(bytes))
        }),
        ("\"tablespace\"", PgType::Name, |_, _| text("pg_default")),
        ("\"description\"", PgType::Text, |_, _| text("numadb")),
    ]
}

fn view_rules() -> &'static [Rule] {
    &[("pg_get_viewdef", PgType::Text, |r, _| match r {
        Row::Relation(rel) => text(format!(
            " -- numadb's system view numadb.{}, computed when a statement reads it: {}.",
            rel.name,
            rel.description().unwrap_or_default()
        )),
        _ => Value::Null,
    })]
}

impl CatalogQuery {
    fn rules(&self) -> &'static [Rule] {
        match self.shape {
            Shape::RelationList | Shape::RelationLookup | Shape::RelationInfo => relation_rules(),
            Shape::Attributes => attribute_rules(),
            Shape::TableIndexes => index_rules(),
            Shape::IndexInfo => index_info_rules(),
            Shape::Namespaces => schema_rules(),
            Shape::Databases => database_rules(),
            Shape::ViewDefinition => view_rules(),
            Shape::Empty => &[],
        }
    }

    /// The rule answering an item: the first whose key is in the item's alias, else in its text (for
    /// `IndexInfo`, `c2` is the table; its other items are the index rules').
    fn rule(&self, item: &Item) -> Option<&'static Rule> {
        let find = |rules: &'static [Rule]| {
            item.alias
                .as_ref()
                .and_then(|alias| rules.iter().find(|(key, _, _)| alias.contains(key)))
                .or_else(|| rules.iter().find(|(key, _, _)| item.key.contains(key)))
        };
        find(self.rules()).or_else(|| if self.shape == Shape::IndexInfo { find(index_rules()) } else { None })
    }

    /// The result columns.
    pub fn columns(&self) -> Vec<Column> {
        self.items
            .iter()
            .map(|item| Column::new(item.name.clone(), self.rule(item).map_or(PgType::Text, |(_, t, _)| *t)))
            .collect()
    }

    fn row(&self, row: &Row<'_>, context: &CompatContext<'_>) -> Vec<Value> {
        self.items.iter().map(|item| self.rule(item).map_or(Value::Null, |(_, _, value)| value(row, context))).collect()
    }

    fn matches(&self, relation: &Relation, context: &CompatContext<'_>) -> bool {
        if let Some(kinds) = &self.kinds
            && !kinds.contains(&relation.kind)
        {
            return false;
        }
        if self.name.as_ref().is_some_and(|n| !n.is_match(&relation.name)) {
            return false;
        }
        if self.schema.as_ref().is_some_and(|s| !s.is_match(relation.schema)) {
            return false;
        }
        !self.visible_only || relation.visible(context)
    }

    fn by_oid<'r>(&self, relations: &'r [Relation]) -> Option<&'r Relation> {
        let oid = self.oid?;
        relations.iter().find(|r| r.oid == oid)
    }

    /// The answer's rows.
    pub fn rows(&self, context: &CompatContext<'_>) -> Result<Vec<Vec<Value>>, ExecError> {
        let relations = relations(context);
        Ok(match self.shape {
            Shape::RelationList | Shape::RelationLookup => {
                let mut matched: Vec<&Relation> = relations.iter().filter(|r| self.matches(r, context)).collect();
                matched.sort_by(|a, b| (a.schema, &a.name).cmp(&(b.schema, &b.name)));
                matched.into_iter().map(|r| self.row(&Row::Relation(r), context)).collect()
            }
            Shape::RelationInfo | Shape::ViewDefinition => {
                self.by_oid(&relations).map(|r| self.row(&Row::Relation(r), context)).into_iter().collect()
            }
            Shape::Attributes => match self.by_oid(&relations) {
                Some(relation) => {
                    relation.attributes(context)?.iter().map(|a| self.row(&Row::Attribute(a), context)).collect()
                }
                None => Vec::new(),
            },
            Shape::TableIndexes => match self.by_oid(&relations) {
                Some(Relation { source: Source::Table(table), .. }) => {
                    let mut indexes = table.snapshot().indexes;
                    indexes.sort_by(|a, b| (!is_primary(table, a), a.name()).cmp(&(!is_primary(table, b), b.name())));
                    indexes.iter().map(|i| self.row(&Row::Index(table, i), context)).collect()
                }
                _ => Vec::new(),
            },
            Shape::IndexInfo => match self.by_oid(&relations) {
                Some(Relation { source: Source::Index { table, index }, .. }) => {
                    vec![self.row(&Row::Index(table, index), context)]
                }
                _ => Vec::new(),
            },
            Shape::Namespaces => SCHEMAS
                .iter()
                .filter(|(name, _, _)| self.schema.as_ref().is_none_or(|s| s.is_match(name)))
                .map(|(name, _, owner)| self.row(&Row::Schema(name, owner), context))
                .collect(),
            Shape::Databases => vec![self.row(&Row::Database, context)],
            Shape::Empty => Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psql_15_queries_are_recognised_by_shape() {
        let list = r#"SELECT n.nspname as "Schema",
  c.relname as "Name",
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view' END as "Type",
  pg_catalog.pg_get_userbyid(c.relowner) as "Owner"
FROM pg_catalog.pg_class c
     LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r','p','')
  AND c.relname OPERATOR(pg_catalog.~) '^(t.*)$' COLLATE pg_catalog.default
  AND pg_catalog.pg_table_is_visible(c.oid)
ORDER BY 1,2;"#;
        let query = recognise(list).unwrap();
        assert_eq!(query.shape, Shape::RelationList);
        assert_eq!(
            query.items.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
            vec!["Schema", "Name", "Type", "Owner"]
        );
        assert_eq!(query.kinds, Some(vec!['r', 'p']));
        assert!(query.name.as_ref().unwrap().is_match("tbl"));
        assert!(query.visible_only);
        let info = "SELECT c.relchecks, c.relkind, c.relhasindex, false AS relhasoids, '', am.amname\n\
                    FROM pg_catalog.pg_class c\n LEFT JOIN pg_catalog.pg_am am ON (c.relam = am.oid)\nWHERE c.oid = '16384';";
        let query = recognise(info).unwrap();
        assert_eq!(query.shape, Shape::RelationInfo);
        assert_eq!(query.oid, Some(16384));
        assert_eq!(
            query.columns().iter().map(|c| c.pg_type).collect::<Vec<_>>(),
            vec![PgType::Int2, PgType::Char, PgType::Bool, PgType::Bool, PgType::Text, PgType::Name]
        );
        assert_eq!(query.items[3].name, "relhasoids");
        assert_eq!(query.items[4].name, "?column?");
        assert!(recognise("SELECT pol.polname FROM pg_catalog.pg_policy pol WHERE pol.polrelid = '1'").is_some());
        assert!(recognise("SELECT * FROM pg_catalog.pg_proc").is_none());
    }

    #[test]
    fn sizes_print_like_pg_size_pretty() {
        assert_eq!(size_pretty(8192), "8192 bytes");
        assert_eq!(size_pretty(10 * 1024), "10 kB");
        assert_eq!(size_pretty(123_456_789), "118 MB");
        assert_eq!(size_pretty(20 * 1024 * 1024 * 1024), "20 GB");
    }

    #[test]
    fn names_are_quoted_when_needed() {
        assert_eq!(quote_ident("c0"), "c0");
        assert_eq!(quote_ident("C0"), "\"C0\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
