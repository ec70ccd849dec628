//! Argument checks. Every error a caller can cause is raised here, with a SQLSTATE that
//! fits and a message that names the bad value and what is allowed; since it aborts the
//! statement, a rejected call changes nothing.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

pub fn fail(code: PgSqlErrorCode, message: String) -> ! {
    ereport!(ERROR, code, message);
}

pub fn invalid(message: String) -> ! {
    fail(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, message)
}

pub fn out_of_range(message: String) -> ! {
    fail(PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, message)
}

pub fn undefined(message: String) -> ! {
    fail(PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT, message)
}

/// The value of a non-NULL argument.
pub fn required<T>(name: &str, value: Option<T>) -> T {
    match value {
        Some(v) => v,
        None => fail(
            PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
            format!("{name} must not be NULL"),
        ),
    }
}

/// The elements of a non-NULL array argument that holds no NULL.
pub fn required_elements<T>(name: &str, value: Option<Vec<Option<T>>>) -> Vec<T> {
    required(name, value)
        .into_iter()
        .enumerate()
        .map(|(i, element)| match element {
            Some(v) => v,
            None => fail(
                PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                format!("{name}[{}] must not be NULL", i + 1),
            ),
        })
        .collect()
}

/// A cooldown in microseconds: from zero to a year, without months (whose length varies).
pub fn cooldown_micros(cooldown: pgrx::datum::Interval) -> i64 {
    interval_micros("cooldown", cooldown, 0, 366, "'0' to '366 days'")
}

/// Argument `name` in microseconds, from `min_micros` to `max_days`, without months;
/// `range` says so in the error.
pub fn interval_micros(
    name: &str,
    value: pgrx::datum::Interval,
    min_micros: i128,
    max_days: i128,
    range: &str,
) -> i64 {
    // i128: a huge interval must not wrap around into the allowed range.
    let micros = i128::from(value.days()) * 86_400_000_000 + i128::from(value.micros());
    if value.months() != 0 {
        invalid(format!(
            "{name} = '{value}' counts in months; give it in days, hours, minutes or seconds"
        ));
    }
    if !(min_micros..=max_days * 86_400_000_000).contains(&micros) {
        out_of_range(format!(
            "{name} = '{value}' is outside the allowed range ({range})"
        ));
    }
    micros as i64
}
