//! The wizard's database: the tables a study ships (CSV or JSON files, or tables of a SQLite
//! file), loaded into an in-memory SQLite database when the study loads, and searched only with
//! parameterised queries.
//!
//! Every table and column name that reaches SQL comes from the study's own files and is checked
//! against a whitelist (letters, digits and `_`; a query names only columns the table has), and
//! every value a participant sends is bound as a parameter: no text a participant types is ever
//! pasted into SQL.

use std::path::Path;
use std::sync::Mutex;

use indexmap::IndexMap;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, params_from_iter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::load::StudySource;
use crate::model::{DatabaseSpec, TableSpec};

/// Most rows one query returns.
pub const MAX_RESULTS: usize = 20;
/// Most filters one query takes.
pub const MAX_FILTERS: usize = 16;
/// Longest filter value, in characters.
pub const MAX_FILTER_CHARS: usize = 200;

/// One row: column name → value (string, number, bool or null), in the table's column order.
pub type Row = IndexMap<String, Value>;

/// The type SQLite stores a column as, inferred from its values when loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    /// Every value a whole number.
    Integer,
    /// Every value a number.
    Real,
    /// Anything else.
    Text,
}

impl ColumnType {
    fn sql(self) -> &'static str {
        match self {
            ColumnType::Integer => "INTEGER",
            ColumnType::Real => "REAL",
            ColumnType::Text => "TEXT",
        }
    }
    /// Whether a range filter applies.
    pub fn is_numeric(self) -> bool {
        matches!(self, ColumnType::Integer | ColumnType::Real)
    }
}

/// A loaded table: its key column and columns, in order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TableInfo {
    pub name: String,
    pub key: String,
    pub columns: Vec<(String, ColumnType)>,
    pub rows: usize,
}

impl TableInfo {
    /// The type of `column`, if the table has it.
    pub fn column(&self, column: &str) -> Option<ColumnType> {
        self.columns
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, t)| *t)
    }
}

/// One search condition on one column; on the wire `{"column": "area", "op": "equals",
/// "value": "old town"}`, `{"column": "name", "op": "contains", "value": "fig"}` or
/// `{"column": "price", "op": "range", "min": 10, "max": 30}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Filter {
    /// A column of the table.
    pub column: String,
    #[serde(flatten)]
    pub op: FilterOp,
}

/// How a filter matches.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FilterOp {
    /// The value equals this one (text compared without regard to ASCII case).
    Equals { value: Value },
    /// The value contains this text (without regard to case).
    Contains { value: String },
    /// A number between `min` and `max`, both included; either may be left out.
    Range {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        min: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max: Option<f64>,
    },
}

/// Why a query or a selection was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum QueryError {
    #[error("the study has no table “{table}”")]
    UnknownTable { table: String },
    #[error("the table “{table}” has no column “{column}”")]
    UnknownColumn { table: String, column: String },
    #[error("a range needs a numeric column; “{column}” holds text")]
    RangeOnText { column: String },
    #[error("“{column}”: {reason}")]
    BadValue { column: String, reason: String },
    #[error("at most {max} filters")]
    TooManyFilters { max: usize },
    #[error("the table “{table}” has no row “{key}”")]
    UnknownRow { table: String, key: String },
    #[error("the database failed: {message}")]
    Sql { message: String },
}

fn sql_err(e: rusqlite::Error) -> QueryError {
    QueryError::Sql {
        message: e.to_string(),
    }
}

/// The rows a query found (at most [`MAX_RESULTS`]) and their keys.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueryResult {
    pub keys: Vec<String>,
    pub rows: Vec<Row>,
}

/// A problem loading a table: the data file, and where in it when known.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadError {
    /// The table, as the study names it.
    pub table: String,
    /// The data file (relative to the study folder).
    pub file: String,
    /// The row, from 1 for the first record (a CSV header is row 0).
    pub row: Option<usize>,
    pub column: Option<String>,
    pub message: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "table `{}` ({}", self.table, self.file)?;
        if let Some(r) = self.row {
            write!(f, ", row {r}")?;
        }
        if let Some(c) = &self.column {
            write!(f, ", column `{c}`")?;
        }
        write!(f, "): {}", self.message)
    }
}

impl std::error::Error for LoadError {}

/// The wizard's database of one study, shared by all its sessions (read only once loaded).
pub struct Database {
    conn: Mutex<Connection>,
    tables: IndexMap<String, TableInfo>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("tables", &self.tables)
            .finish_non_exhaustive()
    }
}

/// Whether `name` may become an SQL name: letters, digits and `_`, not starting with a digit.
/// Letters and digits of any script count (CrossWOZ's columns are `名称`, `评分`...), so a name
/// never holds a quote, a space or punctuation; at most 64 bytes.
pub fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !name.starts_with(|c: char| c.is_numeric())
}

/// What joins the items of a list value of a JSON table into one text (`["烤鸭", "炸酱面"]`
/// becomes `烤鸭, 炸酱面`), so `contains` finds one item.
pub const LIST_SEPARATOR: &str = ", ";

/// A table read from its file, before it is stored.
struct Raw {
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
}

impl Database {
    /// Loads every table of `spec` from the study's files into a new in-memory database.
    pub fn load(spec: &DatabaseSpec, source: &StudySource) -> Result<Database, LoadError> {
        let conn = Connection::open_in_memory().map_err(|e| LoadError {
            table: String::new(),
            file: String::new(),
            row: None,
            column: None,
            message: format!("cannot open an in-memory database: {e}"),
        })?;
        let mut db = Database {
            conn: Mutex::new(conn),
            tables: IndexMap::new(),
        };
        let mut sqlite: Option<Connection> = None;
        for (name, t) in &spec.tables {
            let file = t
                .file
                .clone()
                .or_else(|| spec.sqlite.clone())
                .unwrap_or_default();
            let err = |row: Option<usize>, column: Option<&str>, message: String| LoadError {
                table: name.clone(),
                file: file.clone(),
                row,
                column: column.map(str::to_string),
                message,
            };
            if !is_plain_name(name) {
                return Err(err(
                    None,
                    None,
                    "a table name is letters, digits and `_` (not starting with a digit)".into(),
                ));
            }
            let raw = read_table(spec, source, name, t, &mut sqlite, &err)?;
            let info = db
                .store(name, &t.key, raw)
                .map_err(|(r, c, m)| err(r, c.as_deref(), m))?;
            named_columns(&info, t, &err)?;
            db.tables.insert(name.clone(), info);
        }
        Ok(db)
    }

    /// The tables, in the study's order.
    pub fn tables(&self) -> &IndexMap<String, TableInfo> {
        &self.tables
    }

    /// Creates the table, checks its columns and key, and inserts its rows.
    fn store(&mut self, name: &str, key: &str, raw: Raw) -> Result<TableInfo, Problem> {
        let mut seen: Vec<&str> = vec![];
        for c in &raw.columns {
            if !is_plain_name(c) {
                return Err((
                    Some(0),
                    Some(c.clone()),
                    "a column name is letters, digits and `_` (not starting with a digit)".into(),
                ));
            }
            if seen.contains(&c.as_str()) {
                return Err((Some(0), Some(c.clone()), "the column is named twice".into()));
            }
            seen.push(c);
        }
        let Some(key_idx) = raw.columns.iter().position(|c| c == key) else {
            return Err((
                None,
                Some(key.to_string()),
                format!(
                    "the key column is not in the table (its columns: {})",
                    raw.columns.join(", ")
                ),
            ));
        };
        let mut keys = std::collections::HashSet::new();
        for (i, row) in raw.rows.iter().enumerate() {
            let k = value_text(&row[key_idx]);
            if k.is_empty() {
                return Err((
                    Some(i + 1),
                    Some(key.to_string()),
                    "the key is empty".into(),
                ));
            }
            if !keys.insert(k.clone()) {
                return Err((
                    Some(i + 1),
                    Some(key.to_string()),
                    format!("the key “{k}” is used by an earlier row"),
                ));
            }
        }
        let types: Vec<ColumnType> = (0..raw.columns.len())
            .map(|ci| infer(raw.rows.iter().map(|r| &r[ci])))
            .collect();
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        let cols = raw
            .columns
            .iter()
            .zip(&types)
            .map(|(c, t)| format!("\"{c}\" {}", t.sql()))
            .collect::<Vec<_>>()
            .join(", ");
        let sql_problem = |e: rusqlite::Error| (None, None, format!("cannot store the table: {e}"));
        conn.execute(&format!("CREATE TABLE \"{name}\" ({cols})"), [])
            .map_err(sql_problem)?;
        let marks = vec!["?"; raw.columns.len()].join(", ");
        let tx = conn.transaction().map_err(sql_problem)?;
        {
            let mut ins = tx
                .prepare(&format!("INSERT INTO \"{name}\" VALUES ({marks})"))
                .map_err(sql_problem)?;
            for row in &raw.rows {
                ins.execute(params_from_iter(row.iter().map(to_sql)))
                    .map_err(sql_problem)?;
            }
        }
        tx.commit().map_err(sql_problem)?;
        Ok(TableInfo {
            name: name.to_string(),
            key: key.to_string(),
            columns: raw.columns.into_iter().zip(types).collect(),
            rows: raw.rows.len(),
        })
    }

    /// The rows of `table` matching every filter, in the table's order, at most `limit` (and at
    /// most [`MAX_RESULTS`]).
    pub fn query(
        &self,
        table: &str,
        filters: &[Filter],
        limit: usize,
    ) -> Result<QueryResult, QueryError> {
        let info = self.table(table)?;
        if filters.len() > MAX_FILTERS {
            return Err(QueryError::TooManyFilters { max: MAX_FILTERS });
        }
        let mut clauses: Vec<String> = vec![];
        let mut params: Vec<SqlValue> = vec![];
        for f in filters {
            filter_clause(table, info, f, &mut clauses, &mut params)?;
        }
        let limit = limit.min(MAX_RESULTS);
        params.push(SqlValue::Integer(i64::try_from(limit).unwrap_or(0)));
        let where_sql = if clauses.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", clauses.join(" AND "))
        };
        let sql = format!(
            "SELECT * FROM \"{}\"{where_sql} ORDER BY rowid LIMIT ?{}",
            info.name,
            params.len()
        );
        let rows = self.rows(info, &sql, params)?;
        let keys = rows
            .iter()
            .map(|r| r.get(&info.key).map(value_text).unwrap_or_default())
            .collect();
        Ok(QueryResult { keys, rows })
    }

    /// The row of `table` whose key is `key`.
    pub fn select(&self, table: &str, key: &str) -> Result<Row, QueryError> {
        let info = self.table(table)?;
        let sql = format!(
            "SELECT * FROM \"{}\" WHERE CAST(\"{}\" AS TEXT) = ?1 LIMIT 1",
            info.name, info.key
        );
        self.rows(info, &sql, vec![SqlValue::Text(key.to_string())])?
            .into_iter()
            .next()
            .ok_or_else(|| QueryError::UnknownRow {
                table: table.to_string(),
                key: key.to_string(),
            })
    }

    /// Every row of `table`, in the table's order (what the goal generator draws from; never
    /// sent to a participant).
    pub fn all_rows(&self, table: &str) -> Result<Vec<Row>, QueryError> {
        let info = self.table(table)?;
        let sql = format!("SELECT * FROM \"{}\" ORDER BY rowid", info.name);
        self.rows(info, &sql, vec![])
    }

    fn table(&self, table: &str) -> Result<&TableInfo, QueryError> {
        self.tables
            .get(table)
            .ok_or_else(|| QueryError::UnknownTable {
                table: table.to_string(),
            })
    }

    fn rows(
        &self,
        info: &TableInfo,
        sql: &str,
        params: Vec<SqlValue>,
    ) -> Result<Vec<Row>, QueryError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
        let mut out = vec![];
        let mut rows = stmt.query(params_from_iter(params)).map_err(sql_err)?;
        while let Some(r) = rows.next().map_err(sql_err)? {
            let mut row = Row::new();
            for (i, (c, _)) in info.columns.iter().enumerate() {
                let v: SqlValue = r.get(i).map_err(sql_err)?;
                row.insert(c.clone(), from_sql(v));
            }
            out.push(row);
        }
        Ok(out)
    }
}

/// A load problem inside one file: row, column, message.
type Problem = (Option<usize>, Option<String>, String);

/// How a table's load problem is reported: the row, the column and the message.
type LoadErr<'a> = dyn Fn(Option<usize>, Option<&str>, String) -> LoadError + 'a;

/// Reads the rows of table `name`: from its CSV or JSON file, else from the database's SQLite
/// file (opened once, into `sqlite`, for all the tables it holds).
fn read_table(
    spec: &DatabaseSpec,
    source: &StudySource,
    name: &str,
    t: &TableSpec,
    sqlite: &mut Option<Connection>,
    err: &LoadErr<'_>,
) -> Result<Raw, LoadError> {
    match &t.file {
        Some(f) => {
            let bytes = source
                .read(f)
                .ok_or_else(|| err(None, None, "cannot read the file".into()))?;
            if f.ends_with(".csv") {
                read_csv(&bytes).map_err(|(r, c, m)| err(r, c.as_deref(), m))
            } else if f.ends_with(".json") {
                read_json(&bytes).map_err(|(r, c, m)| err(r, c.as_deref(), m))
            } else {
                Err(err(None, None, "a table file ends in .csv or .json".into()))
            }
        }
        None => {
            let Some(path) = &spec.sqlite else {
                return Err(err(
                    None,
                    None,
                    "give the table a `file`, or the database a `sqlite` file".into(),
                ));
            };
            if sqlite.is_none() {
                *sqlite = Some(open_sqlite(source, path).map_err(|m| err(None, None, m))?);
            }
            let src = sqlite.as_ref().expect("opened above");
            read_sqlite(src, name).map_err(|(r, c, m)| err(r, c.as_deref(), m))
        }
    }
}

/// The columns a table's `show` and `labels` name must be columns of the table.
fn named_columns(info: &TableInfo, t: &TableSpec, err: &LoadErr<'_>) -> Result<(), LoadError> {
    let named = (t.show.iter().map(|c| (c, "show"))).chain(t.labels.keys().map(|c| (c, "labels")));
    for (c, key) in named {
        if info.column(c).is_none() {
            let names: Vec<&str> = info.columns.iter().map(|(n, _)| n.as_str()).collect();
            return Err(err(
                None,
                Some(c),
                format!(
                    "`{key}` names a column the table lacks (its columns: {})",
                    names.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Adds filter `f` on `table` to a query: its SQL condition to `clauses`, its values to
/// `params`.
fn filter_clause(
    table: &str,
    info: &TableInfo,
    f: &Filter,
    clauses: &mut Vec<String>,
    params: &mut Vec<SqlValue>,
) -> Result<(), QueryError> {
    // The whitelist: only a column the table has ever reaches the SQL text, quoted.
    let Some(ty) = info.column(&f.column) else {
        return Err(QueryError::UnknownColumn {
            table: table.to_string(),
            column: f.column.clone(),
        });
    };
    let col = &f.column;
    let bad = |reason: &str| QueryError::BadValue {
        column: col.clone(),
        reason: reason.to_string(),
    };
    match &f.op {
        FilterOp::Equals { value } => {
            let v = match value {
                Value::String(s) if s.chars().count() > MAX_FILTER_CHARS => {
                    return Err(bad("the value is too long"));
                }
                Value::String(s) => SqlValue::Text(s.clone()),
                Value::Number(_) | Value::Bool(_) => to_sql(value),
                _ => return Err(bad("equals takes a text, a number or true/false")),
            };
            params.push(v);
            clauses.push(format!("\"{col}\" = ?{} COLLATE NOCASE", params.len()));
        }
        FilterOp::Contains { value } => {
            if value.chars().count() > MAX_FILTER_CHARS {
                return Err(bad("the value is too long"));
            }
            params.push(SqlValue::Text(value.to_lowercase()));
            clauses.push(format!(
                "instr(lower(CAST(\"{col}\" AS TEXT)), ?{}) > 0",
                params.len()
            ));
        }
        FilterOp::Range { min, max } => {
            if !ty.is_numeric() {
                return Err(QueryError::RangeOnText {
                    column: col.clone(),
                });
            }
            for (bound, cmp) in [(min, ">="), (max, "<=")] {
                if let Some(b) = bound {
                    if !b.is_finite() {
                        return Err(bad("a range bound is a finite number"));
                    }
                    params.push(SqlValue::Real(*b));
                    clauses.push(format!("\"{col}\" {cmp} ?{}", params.len()));
                }
            }
        }
    }
    Ok(())
}

/// A value as text: strings as they are, numbers and booleans as written, null as "".
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn infer<'a>(values: impl Iterator<Item = &'a Value>) -> ColumnType {
    let mut ty = ColumnType::Integer;
    let mut any = false;
    for v in values {
        match v {
            Value::Null => continue,
            Value::Number(n) if n.is_i64() || n.is_u64() => {}
            Value::Number(_) => ty = ColumnType::Real,
            _ => return ColumnType::Text,
        }
        any = true;
    }
    if any { ty } else { ColumnType::Text }
}

fn to_sql(v: &Value) -> SqlValue {
    match v {
        Value::Null => SqlValue::Null,
        Value::Bool(b) => SqlValue::Integer(i64::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => SqlValue::Integer(i),
            None => SqlValue::Real(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => SqlValue::Text(s.clone()),
        other => SqlValue::Text(other.to_string()),
    }
}

fn from_sql(v: SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) => Value::from(i),
        SqlValue::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        SqlValue::Text(s) => Value::String(s),
        SqlValue::Blob(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
    }
}

/// A CSV cell: empty → null, a whole number, a number, else the text.
fn cell(s: &str) -> Value {
    let t = s.trim();
    if t.is_empty() {
        return Value::Null;
    }
    if let Ok(i) = t.parse::<i64>() {
        return Value::from(i);
    }
    if let Ok(f) = t.parse::<f64>()
        && f.is_finite()
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(s.to_string())
}

fn read_csv(bytes: &[u8]) -> Result<Raw, Problem> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(bytes);
    let columns: Vec<String> = r
        .headers()
        .map_err(|e| (Some(0), None, format!("cannot read the header row: {e}")))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let mut rows = vec![];
    for (i, rec) in r.records().enumerate() {
        let rec = rec.map_err(|e| {
            let msg = match e.kind() {
                csv::ErrorKind::UnequalLengths {
                    expected_len, len, ..
                } => format!("{len} fields where the header has {expected_len}"),
                _ => e.to_string(),
            };
            (Some(i + 1), None, msg)
        })?;
        rows.push(rec.iter().map(cell).collect());
    }
    Ok(Raw { columns, rows })
}

fn read_json(bytes: &[u8]) -> Result<Raw, Problem> {
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| (None, None, format!("not valid JSON: {e}")))?;
    let Value::Array(items) = v else {
        return Err((None, None, "a JSON table is an array of objects".into()));
    };
    let mut columns: Vec<String> = vec![];
    let mut objects: Vec<serde_json::Map<String, Value>> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        // A row is an object, or (as in CrossWOZ's database files) a pair `[name, object]`.
        let o = match item {
            Value::Object(o) => o,
            Value::Array(mut pair)
                if pair.len() == 2 && pair[0].is_string() && pair[1].is_object() =>
            {
                match pair.pop() {
                    Some(Value::Object(o)) => o,
                    _ => unreachable!("checked above"),
                }
            }
            _ => {
                return Err((
                    Some(i + 1),
                    None,
                    "the row is not an object (nor a pair [name, object])".into(),
                ));
            }
        };
        let mut flat = serde_json::Map::with_capacity(o.len());
        for (k, v) in o {
            let v = match v {
                Value::Array(list) => {
                    let mut parts = Vec::with_capacity(list.len());
                    for x in &list {
                        if matches!(x, Value::Array(_) | Value::Object(_)) {
                            return Err((
                                Some(i + 1),
                                Some(k.clone()),
                                "a list holds texts, numbers, true/false or null (not lists or objects)"
                                    .into(),
                            ));
                        }
                        parts.push(value_text(x));
                    }
                    Value::String(parts.join(LIST_SEPARATOR))
                }
                Value::Object(_) => {
                    return Err((
                        Some(i + 1),
                        Some(k.clone()),
                        "a value is a text, a number, true/false, null or a list of those (not an object)"
                            .into(),
                    ));
                }
                v => v,
            };
            if !columns.contains(&k) {
                columns.push(k.clone());
            }
            flat.insert(k, v);
        }
        objects.push(flat);
    }
    let rows = objects
        .iter()
        .map(|item| {
            columns
                .iter()
                .map(|c| item.get(c).cloned().unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    Ok(Raw { columns, rows })
}

fn open_sqlite(source: &StudySource, rel: &str) -> Result<Connection, String> {
    let StudySource::Dir(dir) = source else {
        return Err("only a study folder on disk can point at a SQLite file".into());
    };
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err("the SQLite file is a path inside the study folder".into());
    }
    Connection::open_with_flags(
        dir.join(p),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| format!("cannot open the SQLite file: {e}"))
}

fn read_sqlite(src: &Connection, name: &str) -> Result<Raw, Problem> {
    // `name` passed is_plain_name, so quoting it is enough.
    let mut stmt = src
        .prepare(&format!("SELECT * FROM \"{name}\""))
        .map_err(|e| (None, None, format!("cannot read the table: {e}")))?;
    let columns: Vec<String> = stmt.column_names().iter().map(|c| c.to_string()).collect();
    let n = columns.len();
    let mut rows = vec![];
    let mut q = stmt
        .query([])
        .map_err(|e| (None, None, format!("cannot read the table: {e}")))?;
    let mut i = 0;
    while let Some(r) = q
        .next()
        .map_err(|e| (Some(i + 1), None, format!("cannot read the row: {e}")))?
    {
        i += 1;
        let mut row = Vec::with_capacity(n);
        for (ci, name) in columns.iter().enumerate() {
            let v: SqlValue = r
                .get(ci)
                .map_err(|e| (Some(i), Some(name.clone()), e.to_string()))?;
            row.push(from_sql(v));
        }
        rows.push(row);
    }
    Ok(Raw { columns, rows })
}

/// The tables and columns a condition reads from `db`: `db.T`, `db.T.C`, `db['T']`,
/// `db['T']['C']` (and `"..."` quotes), outside string literals; the column is None when the
/// expression names only the table. `has(db.T)` and `'T' in db` name the table too, the latter
/// left unchecked (a string literal).
pub fn condition_refs(src: &str) -> Vec<(String, Option<String>)> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = vec![];
    let mut quote: Option<char> = None;
    let mut i = 0;
    // One member after position `j`: `.name` or `['name']`; returns it and the next position.
    let member = |j: usize| -> Option<(String, usize)> {
        match chars.get(j)? {
            '.' => {
                let name: String = chars[j + 1..]
                    .iter()
                    .take_while(|c| c.is_alphanumeric() || **c == '_')
                    .collect();
                let n = name.chars().count();
                (n > 0).then_some((name, j + 1 + n))
            }
            '[' => {
                let q = *chars.get(j + 1)?;
                if q != '\'' && q != '"' {
                    return None;
                }
                let end = chars[j + 2..].iter().position(|c| *c == q)? + j + 2;
                (chars.get(end + 1) == Some(&']'))
                    .then(|| (chars[j + 2..end].iter().collect(), end + 2))
            }
            _ => None,
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None => {
                let boundary = i == 0
                    || !(chars[i - 1].is_alphanumeric()
                        || chars[i - 1] == '_'
                        || chars[i - 1] == '.');
                if boundary
                    && chars[i..].starts_with(&['d', 'b'])
                    && !chars
                        .get(i + 2)
                        .is_some_and(|c| c.is_alphanumeric() || *c == '_')
                    && let Some((table, next)) = member(i + 2)
                {
                    let (column, next) = match member(next) {
                        Some((c, n)) => (Some(c), n),
                        None => (None, next),
                    };
                    out.push((table, column));
                    i = next;
                    continue;
                }
            }
        }
        i += 1;
    }
    out
}

/// Reports every condition (state and transition `when`, action guards, the goal, the finish and
/// bonus conditions) that reads a table of `db` the study does not declare, or a column the
/// loaded table lacks: such a condition would silently never hold.
pub fn check_conditions(
    study: &crate::model::Study,
    db: &Database,
    diag: &dyn Fn(&str, String, Option<String>) -> crate::load::Diagnostic,
    problems: &mut Vec<crate::load::Diagnostic>,
) {
    let mut sources: Vec<(String, &str)> = vec![];
    for (i, st) in study.states.iter().enumerate() {
        if let Some(w) = &st.when {
            sources.push((format!("/states/{i}/when"), w));
        }
        for (j, t) in st.transitions.iter().enumerate() {
            if let Some(w) = t.when() {
                sources.push((format!("/states/{i}/transitions/{j}/when"), w));
            }
        }
    }
    for (i, a) in study.actions.iter().enumerate() {
        for (ptr, src) in a.guard.iter().flat_map(|g| g.conditions()) {
            sources.push((format!("/actions/{i}/guard{ptr}"), src));
        }
    }
    if let Some(g) = &study.goal {
        sources.push(("/goal".into(), g));
    }
    if let Some(w) = &study.session.finish.when {
        sources.push(("/session/finish/when".into(), w));
    }
    if let Some(b) = study.payment.as_ref().and_then(|p| p.bonus.as_ref()) {
        sources.push(("/payment/bonus/when".into(), &b.when));
    }
    for (ptr, src) in sources {
        for (table, column) in condition_refs(src) {
            let Some(info) = db.tables.get(&table) else {
                let names: Vec<&str> = db.tables.keys().map(String::as_str).collect();
                problems.push(diag(
                    &ptr,
                    format!(
                        "condition `{src}` reads `db.{table}`, a table the study does not declare"
                    ),
                    Some(format!("its tables: {}", names.join(", "))),
                ));
                continue;
            };
            if let Some(c) = column
                && info.column(&c).is_none()
            {
                let cols: Vec<&str> = info.columns.iter().map(|(c, _)| c.as_str()).collect();
                problems.push(diag(
                    &ptr,
                    format!("condition `{src}`: the table `{table}` has no column `{c}`"),
                    Some(format!("its columns: {}", cols.join(", "))),
                ));
            }
        }
    }
}

/// Reports every `{db.TABLE.COLUMN}` slot of the wizard's texts (state templates, approval
/// prompts, fixed options) whose column the loaded table lacks, and every condition reading a
/// table or column of `db` that is not there ([`check_conditions`]).
pub fn check_slots(
    study: &crate::model::Study,
    db: &Database,
    diag: &dyn Fn(&str, String, Option<String>) -> crate::load::Diagnostic,
    problems: &mut Vec<crate::load::Diagnostic>,
) {
    check_conditions(study, db, diag, problems);
    let mut texts: Vec<(String, &str)> = vec![];
    for (i, st) in study.states.iter().enumerate() {
        for (j, t) in st.templates.iter().enumerate() {
            texts.push((format!("/states/{i}/templates/{j}"), t));
        }
        if let Some(p) = st.lock.as_ref().and_then(|l| l.prompt.as_deref()) {
            texts.push((format!("/states/{i}/lock/prompt"), p));
        }
    }
    for (i, f) in study.fixed_options.iter().enumerate() {
        texts.push((format!("/fixed_options/{i}/text"), &f.text));
    }
    for (ptr, text) in texts {
        let Ok(parts) = crate::slots::parse(text) else {
            continue;
        };
        for name in crate::slots::names(&parts) {
            if let Some((t, c)) = crate::slots::db_slot(name)
                && let Some(info) = db.tables.get(t)
                && info.column(c).is_none()
            {
                let cols: Vec<&str> = info.columns.iter().map(|(c, _)| c.as_str()).collect();
                problems.push(diag(
                    &ptr,
                    format!("slot `{{{name}}}`: the table `{t}` has no column `{c}`"),
                    Some(format!("its columns: {}", cols.join(", "))),
                ));
            }
        }
    }
}
