"""Static figures (`lethe_core.util.figures`): what the committed SVGs are made of."""

from lethe_core.util.figures import stable_svg

TEMPLATE = ('<svg><defs id="defs-{uid}"><clipPath id="clip{uid}xyplot"/></defs><g clip-path="url(#clip{uid}xyplot)">'
            '<g class="trace scatter trace{t1}"/><g class="trace bars trace{t2}"/>'
            '<path d="M3f2a01"/></g><defs id="topdefs-{uid}"/><clipPath id="legend{uid}"/></svg>')
DRAWN = TEMPLATE.format(uid="3f2a01", t1="aa0001", t2="bb0002")


def test_plotlys_random_id_becomes_one_derived_from_the_file_name():
    again = TEMPLATE.format(uid="9bc417", t1="cc0003", t2="dd0004")  # the same figure drawn a second time
    a, b = stable_svg(DRAWN, "12_x-1.svg"), stable_svg(again, "12_x-1.svg")
    assert a == b and "3f2a01" not in a.replace('d="M3f2a01"', "")
    assert 'd="M3f2a01"' in a  # only the ids' own places change, never the drawing
    assert "aa0001" not in a and len({a.split("trace scatter trace")[1][:6], a.split("trace bars trace")[1][:6]}) == 2
    assert stable_svg(DRAWN, "12_x-2.svg") != a  # two files of one page keep distinct ids
    assert stable_svg("<svg/>", "x.svg") == "<svg/>"
