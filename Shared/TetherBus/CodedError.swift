/// The codes of a ``CodedError``: one enum for each kind of error, a case for each way it
/// happens.
public protocol ErrorCode: Hashable, Sendable, CaseIterable, RawRepresentable where RawValue == String {}

/// An error with a code, for programs to decide on, and words, for people: what Tether's
/// error types are (``BusError`` says more: what the bus was doing).
public struct CodedError<Code: ErrorCode>: Error, CustomStringConvertible, Sendable, Equatable {
    public let code: Code
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
