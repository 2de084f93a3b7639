"""The greeter's two messages, encoded by hand so the tests need only
`grpcio` (no protobuf package, no generated code):

    message HelloRequest { string name = 1; uint32 count = 2; }
    message HelloReply { string message = 1; }
"""


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data, i):
    n = shift = 0
    while True:
        byte = data[i]
        i += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return n, i


def _fields(data):
    """(field number, value) pairs: bytes for length-delimited fields,
    ints for varints; other wire types are not used by these messages."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 2:
            length, i = _read_varint(data, i)
            value, i = bytes(data[i:i + length]), i + length
        else:
            raise ValueError(f"wire type {wire} in field {number}")
        yield number, value


def _string(number, text):
    raw = text.encode("utf-8")
    # proto3 leaves a default (empty) field out.
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw if raw else b""


def encode_request(name, count=0):
    count_field = _varint(2 << 3 | 0) + _varint(count) if count else b""
    return _string(1, name) + count_field


def decode_request(data):
    name, count = "", 0
    for number, value in _fields(data):
        if number == 1:
            name = value.decode("utf-8")
        elif number == 2:
            count = value
    return name, count


def encode_reply(message):
    return _string(1, message)


def decode_reply(data):
    message = ""
    for number, value in _fields(data):
        if number == 1:
            message = value.decode("utf-8")
    return message
