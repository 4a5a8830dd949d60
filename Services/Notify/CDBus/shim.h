#ifndef TETHER_CDBUS_SHIM_H
#define TETHER_CDBUS_SHIM_H

#include <dbus/dbus.h>

// The type codes are macros with casts, which Swift does not import.
static const int tether_dbus_type_invalid = DBUS_TYPE_INVALID;
static const int tether_dbus_type_byte = DBUS_TYPE_BYTE;
static const int tether_dbus_type_boolean = DBUS_TYPE_BOOLEAN;
static const int tether_dbus_type_int32 = DBUS_TYPE_INT32;
static const int tether_dbus_type_uint32 = DBUS_TYPE_UINT32;
static const int tether_dbus_type_string = DBUS_TYPE_STRING;
static const int tether_dbus_type_array = DBUS_TYPE_ARRAY;
static const int tether_dbus_type_variant = DBUS_TYPE_VARIANT;
static const int tether_dbus_type_dict_entry = DBUS_TYPE_DICT_ENTRY;

#endif
