//! Serde helpers shared by Trainyard's document types.

use serde::{Deserialize, Deserializer};

/// Deserializes an explicit `null` as `T::default()` (Kubernetes output
/// often writes `labels: null` or `resources: {}`).
pub fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
