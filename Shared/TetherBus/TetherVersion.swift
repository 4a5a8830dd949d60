/// Tether's version, which every program's `--version` prints and the package carries.
///
/// Stores and the bus schema carry versions of their own (named migrations,
/// `BusSchema.version`); this one names the release.
public enum TetherVersion {
    /// The release, as `MAJOR.MINOR.PATCH`.
    public static let current = "0.9.0"
}
