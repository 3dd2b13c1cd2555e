"""The demo's sample repositories and the files its scripted agent writes, kept apart from
the demo (which imports the engine): the Actions world's agent command reads them in a
process of its own per stage, where importing the engine cost most of its start-up."""

from __future__ import annotations

TICKET = "https://tracker.example/browse/DEMO-1"
FOLDERS = ("api", "web")
REVIEWER = "ada"
REVIEW_TEXT = "Please escape the name: it comes from the visitor (html.escape)."

SAMPLES: dict[str, dict[str, str]] = {
    "api": {
        "README.md": "# api\n\nThe sample service of `delivery demo`.\n",
        "greeting.py": 'def status() -> str:\n    return "ok"\n',
        "test_greeting.py": (
            "import unittest\n\nfrom greeting import status\n\n\n"
            "class StatusTest(unittest.TestCase):\n"
            "    def test_status(self) -> None:\n"
            '        self.assertEqual(status(), "ok")\n'
        ),
    },
    "web": {
        "README.md": "# web\n\nThe sample web page of `delivery demo`.\n",
        "page.py": 'def title() -> str:\n    return "<h1>Welcome</h1>"\n',
        "test_page.py": (
            "import unittest\n\nfrom page import title\n\n\n"
            "class TitleTest(unittest.TestCase):\n"
            "    def test_title(self) -> None:\n"
            '        self.assertEqual(title(), "<h1>Welcome</h1>")\n'
        ),
    },
}

API_TEST = (
    "import unittest\n\nfrom greeting import hello, status\n\n\n"
    "class GreetingTest(unittest.TestCase):\n"
    "    def test_status(self) -> None:\n"
    '        self.assertEqual(status(), "ok")\n\n'
    "    def test_hello_greets_by_name(self) -> None:\n"
    '        self.assertEqual(hello("Ada"), "Hello, Ada!")\n'
)
API_BUGGY = ('def status() -> str:\n    return "ok"\n\n\n'
             'def hello(name: str) -> str:\n    return "Hello " + name\n')
API_FIXED = ('def status() -> str:\n    return "ok"\n\n\n'
             'def hello(name: str) -> str:\n    return f"Hello, {name}!"\n')
WEB_FIRST = ('def title() -> str:\n    return "<h1>Welcome</h1>"\n\n\n'
             'def greeting(name: str) -> str:\n    return f"<p>Hello, {name}!</p>"\n')
WEB_ESCAPED = ('import html\n\n\ndef title() -> str:\n    return "<h1>Welcome</h1>"\n\n\n'
               'def greeting(name: str) -> str:\n'
               '    return f"<p>Hello, {html.escape(name)}!</p>"\n')
WEB_TEST = (
    "import unittest\n\nfrom page import greeting, title\n\n\n"
    "class PageTest(unittest.TestCase):\n"
    "    def test_title(self) -> None:\n"
    '        self.assertEqual(title(), "<h1>Welcome</h1>")\n\n'
    "    def test_greeting(self) -> None:\n"
    '        self.assertEqual(greeting("Ada"), "<p>Hello, Ada!</p>")\n'
)
WEB_TEST_ESCAPED = WEB_TEST + (
    "\n    def test_greeting_escapes_the_name(self) -> None:\n"
    '        self.assertEqual(greeting("<b>"), "<p>Hello, &lt;b&gt;!</p>")\n'
)
