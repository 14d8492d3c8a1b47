//! Window frame clauses (`ROWS BETWEEN 2 PRECEDING AND CURRENT ROW`), checked as PostgreSQL checks them: the
//! bounds in a possible order (42P20 otherwise), offsets constant, not NULL (22004) and not negative (22013).
//! `RANGE` takes only UNBOUNDED and CURRENT ROW bounds here, and `GROUPS` and `EXCLUDE` are refused (0A000).

use numadb_execution::window::{Frame, FrameBound};
use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{DataType, Value};
use sqlparser::ast::{self, WindowFrameBound, WindowFrameUnits};

use super::{Binder, unsupported};

/// `22013`: a negative frame offset.
const INVALID_PRECEDING_OR_FOLLOWING_SIZE: &str = "22013";
/// `22004`: a NULL frame offset.
const NULL_VALUE_NOT_ALLOWED: &str = "22004";

impl Binder<'_> {
    /// The frame of a window specification.
    pub(super) fn window_frame(&self, frame: &ast::WindowFrame) -> Result<Frame, ExecError> {
        let rows = match frame.units {
            WindowFrameUnits::Rows => true,
            WindowFrameUnits::Range => false,
            WindowFrameUnits::Groups => return Err(unsupported("GROUPS frames")),
        };
        let start = self.frame_bound(&frame.start_bound, rows, "starting")?;
        // `ROWS 2 PRECEDING` is `ROWS BETWEEN 2 PRECEDING AND CURRENT ROW`.
        let end = match &frame.end_bound {
            Some(bound) => self.frame_bound(bound, rows, "ending")?,
            None => FrameBound::CurrentRow,
        };
        let error = |message: &str| Err(ExecError::new(sqlstate::WINDOWING_ERROR, message.to_string()));
        match (start, end) {
            (FrameBound::UnboundedFollowing, _) => error("frame start cannot be UNBOUNDED FOLLOWING"),
            (_, FrameBound::UnboundedPreceding) => error("frame end cannot be UNBOUNDED PRECEDING"),
            (FrameBound::CurrentRow, FrameBound::Preceding(_)) => {
                error("frame starting from current row cannot have preceding rows")
            }
            (FrameBound::Following(_), FrameBound::Preceding(_) | FrameBound::CurrentRow) => {
                error("frame starting from following row cannot have preceding rows")
            }
            _ => Ok(Frame { rows, start, end }),
        }
    }

    fn frame_bound(&self, bound: &WindowFrameBound, rows: bool, which: &str) -> Result<FrameBound, ExecError> {
        let (offset, preceding) = match bound {
            WindowFrameBound::CurrentRow => return Ok(FrameBound::CurrentRow),
            WindowFrameBound::Preceding(None) => return Ok(FrameBound::UnboundedPreceding),
            WindowFrameBound::Following(None) => return Ok(FrameBound::UnboundedFollowing),
            WindowFrameBound::Preceding(Some(offset)) => (offset, true),
            WindowFrameBound::Following(Some(offset)) => (offset, false),
        };
        if !rows {
            return Err(unsupported("RANGE with an offset PRECEDING or FOLLOWING")
                .with_hint("Use ROWS, or RANGE with UNBOUNDED and CURRENT ROW bounds."));
        }
        let offset = self.bind_constant(offset, Some(DataType::BigInt))?;
        if !offset.is_constant() {
            return Err(ExecError::new(
                sqlstate::SYNTAX_ERROR,
                "argument of ROWS must not contain variables".to_string(),
            ));
        }
        let rows = match offset.eval(&[], &[]) {
            Ok(Value::Int(rows)) => rows,
            Ok(Value::Null) => {
                return Err(ExecError::new(NULL_VALUE_NOT_ALLOWED, format!("frame {which} offset must not be null")));
            }
            Ok(other) => return Err(ExecError::internal(format!("a frame offset evaluated to {other:?}"))),
            // A parameter: its value is not known when the statement is planned.
            Err(_) => return Err(unsupported("a frame offset that is a parameter")),
        };
        let rows = u64::try_from(rows).map_err(|_| {
            ExecError::new(INVALID_PRECEDING_OR_FOLLOWING_SIZE, format!("frame {which} offset must not be negative"))
        })?;
        Ok(if preceding { FrameBound::Preceding(rows) } else { FrameBound::Following(rows) })
    }
}
