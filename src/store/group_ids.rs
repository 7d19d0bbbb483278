//! Schema 21's own step: the group ids of the exceptions a ledger already holds, filled in once
//! inside the migration's transaction (the reason is masked in Rust, so SQL alone cannot). Every
//! later write keeps an operation's group id itself (`domain::group`).

use super::Tx;
use super::sql::{Cell, Stmt, get};
use crate::domain::group::{group_id, group_reason};
use crate::error::Result;

/// Rows read and written at a time.
const CHUNK: i64 = 500;

/// Gives every exception without a group id its id.
pub(super) async fn fill(tx: &mut Tx) -> Result<()> {
    let select = format!(
        "SELECT id, workflow, destination, state, reason, payload FROM operations \
         WHERE group_id IS NULL AND state IN ({}) ORDER BY id LIMIT $1",
        super::counts::exception_states()
    );
    loop {
        let rows: Vec<(i64, String)> = Stmt::new(select.as_str(), vec![Cell::Int(Some(CHUNK))])
            .rows(tx.db(), |r| {
                let (workflow, destination, state): (String, String, String) = (
                    get(r, "workflow")?,
                    get(r, "destination")?,
                    get(r, "state")?,
                );
                let reason: Option<String> = get(r, "reason")?;
                let payload: String = get(r, "payload")?;
                let reason = group_reason(reason.as_deref(), &payload);
                Ok((
                    get(r, "id")?,
                    group_id(&workflow, &destination, &state, &reason),
                ))
            })
            .await?;
        if rows.is_empty() {
            return Ok(());
        }
        // one statement both backends read alike: a CASE over the chunk's ids
        let whens: String = (0..rows.len())
            .map(|i| format!(" WHEN ${} THEN ${}", 2 * i + 1, 2 * i + 2))
            .collect();
        let ids: Vec<String> = (0..rows.len()).map(|i| format!("${}", 2 * i + 1)).collect();
        let sql = format!(
            "UPDATE operations SET group_id = CASE id{whens} END WHERE id IN ({})",
            ids.join(", ")
        );
        let cells = rows
            .iter()
            .flat_map(|(id, g)| [Cell::Int(Some(*id)), Cell::Text(Some(g.as_str()))])
            .collect();
        Stmt::new(sql, cells).execute(tx.db()).await?;
    }
}
