//! A run's operations (SPEC 19), found by the run they were recorded with (index
//! `operations_run`).

use super::Store;
use super::columns;
use super::sql::{Cell, Stmt};
use crate::domain::Op;
use crate::error::Result;

impl Store {
    /// Every operation of `run`, in the order they were recorded.
    pub(crate) async fn ops_of_run(&self, run: &str) -> Result<Vec<(i64, Op)>> {
        let stmt = Stmt::new(
            format!(
                "SELECT {} FROM operations WHERE run = $1 ORDER BY id",
                columns::select()
            ),
            vec![Cell::Text(Some(run))],
        );
        stmt.rows(self.conn().await?.db(), columns::decode).await
    }
}
