//! One placement to write: who places which colour where. The lowest of the write path's
//! types: checked in [`crate::placing`], written by [`crate::writing`] and
//! [`crate::storage`], compared with frozen tiles in [`crate::freezing`].

pub struct Item {
    pub user: i64,
    pub x: i32,
    pub y: i32,
    pub color: i32,
}
