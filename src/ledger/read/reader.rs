//! The readers' handle: the ledger seen for reading (`Ledger::read`). Its methods live in the
//! rooms of this folder, each beside its idea.

use crate::ledger::Ledger;

/// The ledger's handle, for reading.
#[derive(Clone, Copy)]
pub struct Reader<'a>(pub(in crate::ledger) &'a Ledger);
