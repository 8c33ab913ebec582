//! Which of the registry's stores a deployment has: `--stores` (env `STORES`), one parser for the
//! writer, reconcile, the experiment and the test kit.
//!
//! A deployment may run without the optional stores (Redis, Elasticsearch, MongoDB): the writer
//! then neither connects to them nor waits for them, and reconcile judges only the stores named.
//! MySQL is never optional: it is the system of record, written synchronously, that reconcile
//! checks every other store against and that `reconcile repair` rebuilds them from. The names
//! are the registry's ([`StoreKind::ALL`]); a name it lacks is refused with the names it has, so a
//! typo fails at startup instead of quietly leaving a store unwritten.

use crate::StoreKind;
use std::fmt;
use std::str::FromStr;

/// The store every selection holds: the system of record.
pub const REQUIRED: StoreKind = StoreKind::Mysql;

/// A set of the registry's stores, always with [`REQUIRED`], kept in registry order (the order
/// of writes and of reconcile's columns), each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection(Vec<StoreKind>);

/// Why a list of stores is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("unknown store `{name}`: the stores are {known} (or `all`)")]
    Unknown { name: String, known: String },
    #[error(
        "`{given}` leaves out {required}, the system of record: every other store is checked and repaired \
         against it, so it cannot be left out; add {required}"
    )]
    WithoutRequired { given: String, required: StoreKind },
    #[error(
        "{store} is not one of the selected stores ({selected}): add it to --stores (STORES) or leave it out here"
    )]
    NotSelected { store: StoreKind, selected: Selection },
}

impl Selection {
    /// Every store of the registry: the default.
    pub fn all() -> Selection {
        Selection(StoreKind::ALL.to_vec())
    }

    /// The stores, in registry order.
    pub fn kinds(&self) -> &[StoreKind] {
        &self.0
    }

    pub fn contains(&self, kind: StoreKind) -> bool {
        self.0.contains(&kind)
    }

    /// Whether every store of the registry is selected.
    pub fn is_all(&self) -> bool {
        self.0.len() == StoreKind::ALL.len()
    }

    /// `kinds` when each is selected (an empty list means every selected store), in registry
    /// order: what a subcommand's own list of stores (`repair --stores`) may name.
    pub fn subset(&self, kinds: &[StoreKind]) -> Result<Vec<StoreKind>, SelectionError> {
        if let Some(&store) = kinds.iter().find(|k| !self.contains(**k)) {
            return Err(SelectionError::NotSelected { store, selected: self.clone() });
        }
        if kinds.is_empty() {
            return Ok(self.0.clone());
        }
        Ok(self.0.iter().copied().filter(|k| kinds.contains(k)).collect())
    }

    /// A store named in a list: its flag name (`es`) or its label (`Elasticsearch`), in any case.
    fn named(name: &str) -> Option<StoreKind> {
        StoreKind::ALL.into_iter().find(|k| name.eq_ignore_ascii_case(k.name()) || name.eq_ignore_ascii_case(k.label()))
    }
}

impl Default for Selection {
    fn default() -> Self {
        Selection::all()
    }
}

/// A comma list of store names or labels, or `all`.
impl FromStr for Selection {
    type Err = SelectionError;

    fn from_str(s: &str) -> Result<Self, SelectionError> {
        if s.trim().eq_ignore_ascii_case("all") {
            return Ok(Selection::all());
        }
        let mut named = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let kind = Selection::named(name).ok_or_else(|| SelectionError::Unknown {
                name: name.to_string(),
                known: StoreKind::ALL.map(|k| k.name()).join(", "),
            })?;
            named.push(kind);
        }
        if !named.contains(&REQUIRED) {
            return Err(SelectionError::WithoutRequired { given: s.trim().to_string(), required: REQUIRED });
        }
        Ok(Selection(StoreKind::ALL.into_iter().filter(|k| named.contains(k)).collect()))
    }
}

/// The flag names, comma separated (`mysql,redis`): what [`FromStr`] reads back.
impl fmt::Display for Selection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|k| k.name()).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of `kinds` as a user writes it, labels or names, in the order given.
    fn list(kinds: &[StoreKind], label: bool) -> String {
        let names: Vec<String> =
            kinds.iter().map(|k| if label { k.label().to_lowercase() } else { k.name().to_string() }).collect();
        names.join(", ")
    }

    /// Three stores besides MySQL (the registry has them; a test of subsets needs them).
    fn others() -> (StoreKind, StoreKind, StoreKind) {
        let o: Vec<StoreKind> = StoreKind::ALL.into_iter().filter(|k| *k != REQUIRED).collect();
        (o[0], o[1], o[o.len() - 1])
    }

    #[test]
    fn the_default_is_every_store_and_reads_back() {
        let all = Selection::default();
        assert_eq!(all.kinds(), StoreKind::ALL);
        assert!(all.is_all());
        assert_eq!(all.to_string().parse::<Selection>(), Ok(all.clone()));
        assert_eq!("ALL".parse::<Selection>(), Ok(all));
    }

    #[test]
    fn names_or_labels_in_any_order_come_out_in_registry_order_once() {
        let (b, c, _) = others();
        let reversed = [c, b, REQUIRED, c];
        for label in [false, true] {
            let s: Selection = list(&reversed, label).parse().unwrap();
            assert_eq!(s.kinds(), [REQUIRED, b, c], "{}", list(&reversed, label));
            assert!(!s.is_all());
        }
        assert_eq!("MySQL".parse::<Selection>().unwrap().kinds(), [REQUIRED]);
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_registrys_names() {
        let e = "mysql,postgres".parse::<Selection>().unwrap_err();
        let text = e.to_string();
        assert!(text.contains("unknown store `postgres`"), "{text}");
        for k in StoreKind::ALL {
            assert!(text.contains(k.name()), "{text} lacks {k}");
        }
    }

    #[test]
    fn a_list_without_mysql_is_refused() {
        let (b, c, _) = others();
        let e = list(&[b, c], false).parse::<Selection>().unwrap_err();
        assert!(matches!(e, SelectionError::WithoutRequired { required: REQUIRED, .. }), "{e}");
        assert!(e.to_string().contains("system of record"), "{e}");
        assert!(matches!("".parse::<Selection>(), Err(SelectionError::WithoutRequired { .. })));
    }

    #[test]
    fn a_subset_must_be_selected() {
        let (b, c, d) = others();
        let s: Selection = list(&[REQUIRED, b, c], false).parse().unwrap();
        assert_eq!(s.subset(&[]).unwrap(), [REQUIRED, b, c]);
        assert_eq!(s.subset(&[c, b]).unwrap(), [b, c]);
        let e = s.subset(&[b, d]).unwrap_err();
        assert!(matches!(e, SelectionError::NotSelected { store, .. } if store == d), "{e}");
        assert!(e.to_string().contains(&s.to_string()), "{e}");
    }
}
