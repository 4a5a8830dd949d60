import CDBus
import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A failure to reach the desktop's notification service, in words.
public struct NotificationServiceError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for the log.
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The desktop's notification service (`org.freedesktop.Notifications`) on the user's D-Bus
/// session bus, through libdbus: one private connection, opened when first needed and again
/// after it broke, closed by ``close()``. Each call blocks for at most ``callTimeout``.
public final class SessionBusNotifications: Sendable {
    static let service = "org.freedesktop.Notifications"
    static let path = "/org/freedesktop/Notifications"
    static let interface = "org.freedesktop.Notifications"
    /// The longest a call waits for the service's answer.
    public static let callTimeout: Duration = .seconds(2)

    private struct Connection: @unchecked Sendable {
        let pointer: OpaquePointer
        /// Whether the service shows markup in a body (its capability `body-markup`).
        var bodyMarkup: Bool
    }

    /// The session bus's address; nil when there is none.
    public let address: String?
    private let connection = Mutex<Connection?>(nil)
    private let appName: String

    /// Talks to the session bus at `address` (nil: there is none); `appName` is what the
    /// notifications say they come from.
    public init(address: String?, appName: String = "Tether") {
        self.address = address
        self.appName = appName
        dbus_threads_init_default()
    }

    deinit {
        close()
    }

    /// The session bus's address in `environment`: `DBUS_SESSION_BUS_ADDRESS`, else the
    /// user's bus socket in `XDG_RUNTIME_DIR` when it exists; nil when there is neither.
    public static func sessionAddress(in environment: [String: String]) -> String? {
        if let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty { return address }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            let socket = runtime + "/bus"
            var status = stat()
            if stat(socket, &status) == 0, (status.st_mode & S_IFMT) == S_IFSOCK { return "unix:path=\(socket)" }
        }
        return nil
    }

    /// Connects if needed and checks that a notification service is there (it owns
    /// `org.freedesktop.Notifications`, or the bus can start one); throws in words otherwise.
    public func checkAvailable() throws(NotificationServiceError) {
        try withConnection { (connection) throws(NotificationServiceError) in
            let owned = try Self.call(
                connection.pointer, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", method: "NameHasOwner"
            ) { iterator in
                Self.append(Self.service, to: &iterator)
            }.firstBoolean
            if owned == true { return }
            let activatable = try Self.call(
                connection.pointer, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                interface: "org.freedesktop.DBus", method: "ListActivatableNames"
            ) { _ in }.strings
            guard activatable.contains(Self.service) else {
                throw NotificationServiceError("no notification service runs on the session bus at \(address ?? "?") (nothing owns \(Self.service))")
            }
        }
    }

    /// Shows `notification` (replacing the one it names, if any); returns the service's id for it.
    public func notify(_ notification: DesktopNotification) throws(NotificationServiceError) -> UInt32 {
        try withConnection { (connection) throws(NotificationServiceError) -> UInt32 in
            let body = connection.bodyMarkup ? NotificationText.escapingMarkup(notification.body) : notification.body
            let answer = try Self.call(connection.pointer, destination: Self.service, path: Self.path, interface: Self.interface, method: "Notify") {
                iterator in
                Self.append(appName, to: &iterator)
                var replaces = notification.replacing ?? 0
                dbus_message_iter_append_basic(&iterator, tether_dbus_type_uint32, &replaces)
                Self.append("", to: &iterator)  // no icon
                Self.append(notification.summary, to: &iterator)
                Self.append(body, to: &iterator)
                var actions = DBusMessageIter()
                dbus_message_iter_open_container(&iterator, tether_dbus_type_array, "s", &actions)
                dbus_message_iter_close_container(&iterator, &actions)
                var hints = DBusMessageIter()
                dbus_message_iter_open_container(&iterator, tether_dbus_type_array, "{sv}", &hints)
                Self.appendHint("urgency", byte: notification.urgency.rawValue, to: &hints)
                Self.appendHint("category", string: notification.category, to: &hints)
                dbus_message_iter_close_container(&iterator, &hints)
                var expires: Int32 = -1  // the service's default
                dbus_message_iter_append_basic(&iterator, tether_dbus_type_int32, &expires)
            }
            guard let id = answer.firstUInt32 else { throw NotificationServiceError("the notification service answered Notify without an id") }
            return id
        }
    }

    /// Closes the notification `id`; one already gone (closed by the user) is no error.
    public func close(notification id: UInt32) throws(NotificationServiceError) {
        try withConnection { (connection) throws(NotificationServiceError) in
            do throws(CallError) {
                _ = try Self.callReportingRemote(
                    connection.pointer, destination: Self.service, path: Self.path, interface: Self.interface, method: "CloseNotification"
                ) { iterator in
                    var id = id
                    dbus_message_iter_append_basic(&iterator, tether_dbus_type_uint32, &id)
                }
            } catch {
                // The specification: a notification that no longer exists is answered with an error.
                if !error.remote { throw error.error }
            }
        }
    }

    /// Closes the connection; the next call opens a new one.
    public func close() {
        connection.withLock { connection in
            if let open = connection {
                dbus_connection_close(open.pointer)
                dbus_connection_unref(open.pointer)
            }
            connection = nil
        }
    }

    // MARK: libdbus

    private func withConnection<T>(_ body: (Connection) throws(NotificationServiceError) -> T) throws(NotificationServiceError) -> T {
        try connection.withLock { (connection: inout Connection?) throws(NotificationServiceError) -> T in
            if let open = connection, dbus_connection_get_is_connected(open.pointer) == 0 {
                dbus_connection_unref(open.pointer)
                connection = nil
            }
            if connection == nil { connection = try open() }
            return try body(connection!)
        }
    }

    private func open() throws(NotificationServiceError) -> Connection {
        guard let address else {
            throw NotificationServiceError("no session bus: DBUS_SESSION_BUS_ADDRESS is not set and XDG_RUNTIME_DIR holds no bus socket")
        }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let pointer = dbus_connection_open_private(address, &error) else {
            throw NotificationServiceError("cannot connect to the session bus at \(address): \(Self.words(error))")
        }
        // libdbus would end the process when the bus goes away.
        dbus_connection_set_exit_on_disconnect(pointer, 0)
        guard dbus_bus_register(pointer, &error) != 0 else {
            dbus_connection_close(pointer)
            dbus_connection_unref(pointer)
            throw NotificationServiceError("the session bus at \(address) did not accept Tether: \(Self.words(error))")
        }
        let capabilities =
            (try? Self.call(pointer, destination: Self.service, path: Self.path, interface: Self.interface, method: "GetCapabilities") { _ in }.strings) ?? []
        return Connection(pointer: pointer, bodyMarkup: capabilities.contains("body-markup"))
    }

    private struct CallError: Error {
        let error: NotificationServiceError
        /// The service answered with an error (rather than the call not reaching it).
        let remote: Bool
    }

    /// What a method call answered: its arguments of the kinds read here.
    private struct Answer {
        var firstBoolean: Bool?
        var firstUInt32: UInt32?
        var strings: [String] = []
    }

    private static func call(
        _ connection: OpaquePointer, destination: String, path: String, interface: String, method: String,
        arguments: (inout DBusMessageIter) -> Void
    ) throws(NotificationServiceError) -> Answer {
        do {
            return try callReportingRemote(connection, destination: destination, path: path, interface: interface, method: method, arguments: arguments)
        } catch {
            throw error.error
        }
    }

    private static func callReportingRemote(
        _ connection: OpaquePointer, destination: String, path: String, interface: String, method: String,
        arguments: (inout DBusMessageIter) -> Void
    ) throws(CallError) -> Answer {
        guard let message = dbus_message_new_method_call(destination, path, interface, method) else {
            throw CallError(error: NotificationServiceError("out of memory for a D-Bus message"), remote: false)
        }
        defer { dbus_message_unref(message) }
        var iterator = DBusMessageIter()
        dbus_message_iter_init_append(message, &iterator)
        arguments(&iterator)
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        let milliseconds = Int32(callTimeout.components.seconds * 1000)
        guard let reply = dbus_connection_send_with_reply_and_block(connection, message, milliseconds, &error) else {
            let name = error.name.map { String(cString: $0) } ?? ""
            let remote = !name.hasPrefix("org.freedesktop.DBus.Error.NoReply") && !name.hasPrefix("org.freedesktop.DBus.Error.Disconnected")
            throw CallError(error: NotificationServiceError("\(method) failed: \(words(error))"), remote: remote)
        }
        defer { dbus_message_unref(reply) }
        var answer = Answer()
        var reader = DBusMessageIter()
        guard dbus_message_iter_init(reply, &reader) != 0 else { return answer }
        repeat {
            switch dbus_message_iter_get_arg_type(&reader) {
            case tether_dbus_type_boolean:
                var value: dbus_bool_t = 0
                dbus_message_iter_get_basic(&reader, &value)
                if answer.firstBoolean == nil { answer.firstBoolean = value != 0 }
            case tether_dbus_type_uint32:
                var value: UInt32 = 0
                dbus_message_iter_get_basic(&reader, &value)
                if answer.firstUInt32 == nil { answer.firstUInt32 = value }
            case tether_dbus_type_array where dbus_message_iter_get_element_type(&reader) == tether_dbus_type_string:
                var element = DBusMessageIter()
                dbus_message_iter_recurse(&reader, &element)
                while dbus_message_iter_get_arg_type(&element) == tether_dbus_type_string {
                    var value: UnsafePointer<CChar>?
                    dbus_message_iter_get_basic(&element, &value)
                    if let value { answer.strings.append(String(cString: value)) }
                    dbus_message_iter_next(&element)
                }
            default:
                break
            }
        } while dbus_message_iter_next(&reader) != 0
        return answer
    }

    private static func append(_ text: String, to iterator: inout DBusMessageIter) {
        // D-Bus strings are UTF-8 without NUL; Swift strings are UTF-8, and a NUL is cut here.
        let valid = String(text.unicodeScalars.filter { $0 != "\0" })
        valid.withCString { pointer in
            var pointer: UnsafePointer<CChar>? = pointer
            dbus_message_iter_append_basic(&iterator, tether_dbus_type_string, &pointer)
        }
    }

    private static func appendHint(_ name: String, byte: UInt8, to hints: inout DBusMessageIter) {
        appendHint(name, signature: "y", to: &hints) { variant in
            var byte = byte
            dbus_message_iter_append_basic(&variant, tether_dbus_type_byte, &byte)
        }
    }

    private static func appendHint(_ name: String, string: String, to hints: inout DBusMessageIter) {
        appendHint(name, signature: "s", to: &hints) { variant in append(string, to: &variant) }
    }

    private static func appendHint(_ name: String, signature: String, to hints: inout DBusMessageIter, value: (inout DBusMessageIter) -> Void) {
        var entry = DBusMessageIter()
        dbus_message_iter_open_container(&hints, tether_dbus_type_dict_entry, nil, &entry)
        append(name, to: &entry)
        var variant = DBusMessageIter()
        dbus_message_iter_open_container(&entry, tether_dbus_type_variant, signature, &variant)
        value(&variant)
        dbus_message_iter_close_container(&entry, &variant)
        dbus_message_iter_close_container(&hints, &entry)
    }

    private static func words(_ error: DBusError) -> String {
        guard withUnsafePointer(to: error, { dbus_error_is_set($0) }) != 0 else { return "no reason given" }
        return error.message.map { String(cString: $0) } ?? (error.name.map { String(cString: $0) } ?? "no reason given")
    }
}
