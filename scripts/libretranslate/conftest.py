# Runs LibreTranslate's own API tests over HTTP against a server at $LT_URL (scripts/libretranslate-api-tests.sh):
# a `client` fixture with the methods and response fields of Flask's test client that they use.
import json, os, urllib.request, urllib.parse, urllib.error
import pytest

class Response:
    def __init__(self, status, data):
        self.status_code, self.data = status, data
    @property
    def json(self):
        return json.loads(self.data)

class Client:
    def __init__(self, base):
        self.base = base
    def _send(self, method, path, data=None, json_body=None):
        headers, body = {}, None
        if json_body is not None:
            body, headers["Content-Type"] = json.dumps(json_body).encode(), "application/json"
        elif data is not None:
            body, headers["Content-Type"] = urllib.parse.urlencode(data).encode(), "application/x-www-form-urlencoded"
        elif method == "POST":
            body, headers["Content-Type"] = b"", "application/x-www-form-urlencoded"
        req = urllib.request.Request(self.base + path, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req) as r:
                return Response(r.status, r.read())
        except urllib.error.HTTPError as e:
            return Response(e.code, e.read())
    def get(self, path):
        return self._send("GET", path)
    def post(self, path, data=None, json=None):
        return self._send("POST", path, data, json)

@pytest.fixture()
def client():
    return Client(os.environ["LT_URL"])
