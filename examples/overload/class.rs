//! The four request classes of the service under test, one route each.

use std::fmt;

/// How important a request is; the server has one route per class.
///
/// The order matches shed's shed order for originals: `Background` is the
/// first to go, `Critical` the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Must be answered; shed only when nothing else is left.
    Critical,
    /// A person is waiting (the default class).
    Interactive,
    /// A job is waiting; can come back later.
    Batch,
    /// Nobody is waiting.
    Background,
}

impl Class {
    /// All classes, most important first.
    pub const ALL: [Class; 4] = [
        Class::Critical,
        Class::Interactive,
        Class::Batch,
        Class::Background,
    ];

    /// Position in [`Class::ALL`], for per-class arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name, as used in tables, CSV and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Class::Critical => "critical",
            Class::Interactive => "interactive",
            Class::Batch => "batch",
            Class::Background => "background",
        }
    }

    /// The route that serves this class.
    pub fn path(self) -> &'static str {
        match self {
            Class::Critical => "/critical",
            Class::Interactive => "/interactive",
            Class::Batch => "/batch",
            Class::Background => "/background",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl From<Class> for shed::Class {
    fn from(class: Class) -> Self {
        match class {
            Class::Critical => shed::Class::Critical,
            Class::Interactive => shed::Class::Interactive,
            Class::Batch => shed::Class::Batch,
            Class::Background => shed::Class::Background,
        }
    }
}
