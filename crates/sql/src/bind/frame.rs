//! Window frame clauses (`ROWS BETWEEN 2 PRECEDING AND CURRENT ROW`), checked as PostgreSQL checks them: the
//! bounds in a possible order (42P20 otherwise), offsets constant, not NULL (22004) and not negative (22013).
//! `GROUPS` needs an ORDER BY; `RANGE` with an offset needs exactly one ORDER BY key (42P20), an integer or double
//! one, with an integer offset for an integer key (0A000 otherwise, as in PostgreSQL, which also has dates and
//! NUMERIC). `EXCLUDE` is not parsed (a syntax error, 42601).

use numadb_execution::plan::SortKey;
use numadb_execution::window::{Frame, FrameBound, FrameOffset, FrameUnits};
use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{DataType, Value};
use sqlparser::ast::{self, WindowFrameBound, WindowFrameUnits};

use super::{Binder, unsupported};

/// `22013`: a negative frame offset.
const INVALID_PRECEDING_OR_FOLLOWING_SIZE: &str = "22013";
/// `22004`: a NULL frame offset.
const NULL_VALUE_NOT_ALLOWED: &str = "22004";

impl Binder<'_> {
    /// The frame of a window specification with order keys `order_by`.
    pub(super) fn window_frame(&self, frame: &ast::WindowFrame, order_by: &[SortKey]) -> Result<Frame, ExecError> {
        let units = match frame.units {
            WindowFrameUnits::Rows => FrameUnits::Rows,
            WindowFrameUnits::Range => FrameUnits::Range,
            WindowFrameUnits::Groups => FrameUnits::Groups,
        };
        let windowing = |message: &str| ExecError::new(sqlstate::WINDOWING_ERROR, message.to_string());
        if units == FrameUnits::Groups && order_by.is_empty() {
            return Err(windowing("GROUPS mode requires an ORDER BY clause"));
        }
        let with_offset = |bound: &WindowFrameBound| {
            matches!(bound, WindowFrameBound::Preceding(Some(_)) | WindowFrameBound::Following(Some(_)))
        };
        // A RANGE offset is a distance between values of the one order key: its type decides the offset's.
        let mut range_key = None;
        if units == FrameUnits::Range
            && (with_offset(&frame.start_bound) || frame.end_bound.as_ref().is_some_and(with_offset))
        {
            let [key] = order_by else {
                return Err(windowing("RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column"));
            };
            let key_type = key.expr.data_type();
            if !matches!(key_type, DataType::Integer | DataType::BigInt | DataType::Double) {
                return Err(unsupported_range(key_type, None));
            }
            range_key = Some(key_type);
        }
        let start = self.frame_bound(&frame.start_bound, units, range_key, "starting")?;
        // `ROWS 2 PRECEDING` is `ROWS BETWEEN 2 PRECEDING AND CURRENT ROW`.
        let end = match &frame.end_bound {
            Some(bound) => self.frame_bound(bound, units, range_key, "ending")?,
            None => FrameBound::CurrentRow,
        };
        match (start, end) {
            (FrameBound::UnboundedFollowing, _) => Err(windowing("frame start cannot be UNBOUNDED FOLLOWING")),
            (_, FrameBound::UnboundedPreceding) => Err(windowing("frame end cannot be UNBOUNDED PRECEDING")),
            (FrameBound::CurrentRow, FrameBound::Preceding(_)) => {
                Err(windowing("frame starting from current row cannot have preceding rows"))
            }
            (FrameBound::Following(_), FrameBound::Preceding(_) | FrameBound::CurrentRow) => {
                Err(windowing("frame starting from following row cannot have preceding rows"))
            }
            _ => Ok(Frame { units, start, end }),
        }
    }

    fn frame_bound(
        &self,
        bound: &WindowFrameBound,
        units: FrameUnits,
        range_key: Option<DataType>,
        which: &str,
    ) -> Result<FrameBound, ExecError> {
        let (offset, preceding) = match bound {
            WindowFrameBound::CurrentRow => return Ok(FrameBound::CurrentRow),
            WindowFrameBound::Preceding(None) => return Ok(FrameBound::UnboundedPreceding),
            WindowFrameBound::Following(None) => return Ok(FrameBound::UnboundedFollowing),
            WindowFrameBound::Preceding(Some(offset)) => (offset, true),
            WindowFrameBound::Following(Some(offset)) => (offset, false),
        };
        let unit = match units {
            FrameUnits::Rows => "ROWS",
            FrameUnits::Range => "RANGE",
            FrameUnits::Groups => "GROUPS",
        };
        let variables = || {
            ExecError::new(sqlstate::INVALID_COLUMN_REFERENCE, format!("argument of {unit} must not contain variables"))
        };
        // Offsets are bound with no columns in scope: a column there is PostgreSQL's 42P10, not 42703.
        let offset = self
            .bind_constant(offset, (units != FrameUnits::Range).then_some(DataType::BigInt))
            .map_err(|error| if error.sqlstate == sqlstate::UNDEFINED_COLUMN { variables() } else { error })?;
        if !offset.is_constant() {
            return Err(variables());
        }
        let value = match offset.eval(&[], &[]) {
            Ok(Value::Null) => {
                return Err(ExecError::new(NULL_VALUE_NOT_ALLOWED, format!("frame {which} offset must not be null")));
            }
            Ok(value) => value,
            // A parameter: its value is not known when the statement is planned.
            Err(_) => return Err(unsupported("a frame offset that is a parameter")),
        };
        let negative = || {
            let message = match units {
                FrameUnits::Range => "invalid preceding or following size in window function".to_string(),
                _ => format!("frame {which} offset must not be negative"),
            };
            ExecError::new(INVALID_PRECEDING_OR_FOLLOWING_SIZE, message)
        };
        let offset = match (value, range_key) {
            (Value::Int(n), Some(DataType::Double)) if n >= 0 => FrameOffset::Distance(n as f64),
            (Value::Int(n), _) => FrameOffset::Count(u64::try_from(n).map_err(|_| negative())?),
            (Value::Double(d), Some(DataType::Double)) if d >= 0.0 => FrameOffset::Distance(d),
            (Value::Double(_), Some(DataType::Double)) => return Err(negative()),
            (Value::Double(_), Some(key)) => return Err(unsupported_range(key, Some(DataType::Double))),
            (Value::Bool(_), Some(key)) => return Err(unsupported_range(key, Some(DataType::Boolean))),
            (Value::Text(_), Some(key)) => return Err(unsupported_range(key, Some(DataType::Text))),
            (other, _) => return Err(ExecError::internal(format!("a frame offset evaluated to {other:?}"))),
        };
        Ok(if preceding { FrameBound::Preceding(offset) } else { FrameBound::Following(offset) })
    }
}

/// PostgreSQL's 0A000 for a RANGE offset it has no distance for.
fn unsupported_range(key: DataType, offset: Option<DataType>) -> ExecError {
    let message = match offset {
        Some(offset) => format!(
            "RANGE with offset PRECEDING/FOLLOWING is not supported for column type {} and offset type {}",
            key.sql_name(),
            offset.sql_name()
        ),
        None => format!("RANGE with offset PRECEDING/FOLLOWING is not supported for column type {}", key.sql_name()),
    };
    ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, message)
}
