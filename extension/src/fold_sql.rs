//! The SQL that finds a board's newest fold (`place.chunk_folds`), shared by the board's
//! load (`storage`, which reads it with the settings) and the folds themselves (`folds`,
//! which take and lock it). Below both, so that the board's load needs nothing of folds.

/// The board's newest fold row (`$board`: the SQL that names the board), which readers
/// take and folds lock.
macro_rules! newest_fold {
    ($board:literal) => {
        concat!(
            "SELECT folded_seq FROM place.chunk_folds WHERE board_id = ",
            $board,
            " ORDER BY folded_seq DESC LIMIT 1"
        )
    };
}
pub(crate) use newest_fold;
