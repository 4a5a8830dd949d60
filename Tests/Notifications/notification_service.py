#!/usr/bin/python3
"""A stand-in for the desktop's notification service, for the tests of tether-notify.

Owns org.freedesktop.Notifications on the session bus that DBUS_SESSION_BUS_ADDRESS names
and answers as a notification daemon does: Notify with an id (the id it replaces, or a new
one), CloseNotification (with the NotificationClosed signal), GetCapabilities (body and
body-markup: tether-notify must escape markup) and GetServerInformation. Each call is
appended to the file named by the first argument as one JSON line; "ready" is printed once
the name is owned.

Needs Debian's python3-dbus and python3-gi (scripts/bootstrap --tests installs them), so it
runs with /usr/bin/python3.
"""
import json
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

INTERFACE = "org.freedesktop.Notifications"
log_path = sys.argv[1]


def record(call):
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(json.dumps(call, ensure_ascii=False) + "\n")


class Notifications(dbus.service.Object):
    def __init__(self, bus):
        self.name = dbus.service.BusName(INTERFACE, bus, do_not_queue=True)
        super().__init__(self.name, "/org/freedesktop/Notifications")
        self.last_id = 0

    @dbus.service.method(INTERFACE, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app_name, replaces_id, icon, summary, body, actions, hints, expire_timeout):
        if replaces_id:
            notification = int(replaces_id)
        else:
            self.last_id += 1
            notification = self.last_id
        record({
            "call": "Notify", "id": notification, "replaces": int(replaces_id), "app": str(app_name), "summary": str(summary),
            "body": str(body), "urgency": int(hints.get("urgency", -1)), "category": str(hints.get("category", "")),
            "expire": int(expire_timeout),
        })
        return dbus.UInt32(notification)

    @dbus.service.method(INTERFACE, in_signature="u", out_signature="")
    def CloseNotification(self, notification):
        record({"call": "CloseNotification", "id": int(notification)})
        self.NotificationClosed(notification, dbus.UInt32(3))

    @dbus.service.signal(INTERFACE, signature="uu")
    def NotificationClosed(self, notification, reason):
        pass

    @dbus.service.method(INTERFACE, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["body", "body-markup"]

    @dbus.service.method(INTERFACE, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("tether-test-notifications", "tether", "1", "1.2")


def main():
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    service = Notifications(dbus.SessionBus())
    print("ready", flush=True)
    GLib.MainLoop().run()
    del service


if __name__ == "__main__":
    main()
