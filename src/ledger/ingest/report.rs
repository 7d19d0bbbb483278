//! What an ingest tells its caller: how many lines did what, and each line not taken.

/// One line that was not taken, with its number and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestProblem {
    pub line: usize,
    /// A refusal (the ledger said no) rather than a malformed line.
    pub refused: bool,
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestReport {
    pub lines: usize,
    pub created: usize,
    pub unchanged: usize,
    pub conflicts: usize,
    pub attempts: usize,
    pub started: usize,
    pub problems: Vec<IngestProblem>,
}

impl IngestReport {
    pub fn malformed(&self) -> usize {
        self.problems.iter().filter(|p| !p.refused).count()
    }
    pub fn refused(&self) -> usize {
        self.problems.iter().filter(|p| p.refused).count()
    }
}
