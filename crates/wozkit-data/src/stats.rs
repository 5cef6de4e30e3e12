//! Statistics for reports.
