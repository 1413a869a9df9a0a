"""The lesson's scorecard from a report's judged claims: per claim of the
lesson, one answer read from the rows that test its own sentence (holds,
does not hold, or holds for some settings and not others, each named),
the side claims apart, sanity checks and not-applicable rows shown, not
counted. `src/report.py` writes it into REPORT.md; the README quotes
it (`docs/sync_readme.py`).

A claim here is a report row (`report.merge_claims`): its verdict per part
(`verdicts`), whether each part's plan powered it (`powered`), its
`lesson` number, `family`, `role`, `label` and `headline`.
"""

from src import claims as claims_lib
from src import gates as gates_lib
from src import stats

# The lesson's claims, in its order (the section number of each part says
# which it tests): a short title, and the lesson's own words.
LESSON = {
    1: ('The memory task', '"The sequence begins with a symbol (A or B), '
        'continues with a neutral filler zone, and at the end is asked to '
        'identify the first character."'),
    2: ('Distance', '"The recurrent network gave way after only fifteen '
        'steps ... attention stays unbeatable and shows no sign of tiring as '
        'the distance grows."'),
    3: ('The searchlight', '"For sequences beginning with A, the initial '
        'position captures over ninety per cent of the gaze. For those with '
        'B, the attention is more dispersed."'),
    4: ('The direct bridge', '"The gradient signal flows unhindered along '
        'this footbridge" (through recurrence it "had to cross an endless '
        'series of successive multiplications").'),
    5: ('All at once, at an N x N price', '"The matches are found by a single '
        'massive matrix multiplication ... if we double the number of words, '
        'the number of computations multiplies fourfold."'),
    6: ('Heads', '"With no directive imposed from outside, the heads '
        'specialise spontaneously."'),
    7: ('Depth', '"A single layer ... cannot directly extract what lies '
        'immediately after that word."'),
    8: ('Routing', '"Attention ... only moves information from one place to '
        'another without transforming it deeply"; a dense block digests it.'),
    9: ('The summary that fills up', '"A piece of information ... crushed '
        'into an intermediate summary that fills up quickly."'),
    10: ('Beyond the lesson', 'Linear attention, the LRU and Mamba on the '
         'same claims.'),
}


def anchor(number: int) -> str:
  """The REPORT.md heading anchor of lesson claim `number` (GitHub's)."""
  title = f'{number}. {LESSON[number][0]}'.lower()
  return ''.join(c for c in title if c.isalnum() or c in ' -').replace(
      ' ', '-')


def verdict_counts(verdicts: list[str]) -> str:
  """'2 held, 1 did not hold, 3 inconclusive (1 underpowered)', and the
  claims two parts measured whose verdicts differ ('1 split between
  parts'), in that order."""
  split = sum('; ' in v for v in verdicts)
  one = [v for v in verdicts if '; ' not in v]
  under = sum(v.startswith(stats.INCONCLUSIVE + ' (') for v in one)
  counts = [(sum(v == stats.HELD for v in one), stats.HELD),
            (sum(v == stats.NOT_HELD for v in one), stats.NOT_HELD),
            (sum(v.startswith(stats.INCONCLUSIVE) for v in one),
             stats.INCONCLUSIVE + (f' ({under} underpowered)' if under
                                   else '')),
            (split, 'split between parts')]
  return ', '.join(f'{n} {what}' for n, what in counts if n)


def counted(claims: list[dict], role: str = claims_lib.LESSON) -> list[dict]:
  """The rows a scorecard counts for `role`: that role's, judged (not
  `not applicable`)."""
  return [c for c in claims if c.get('role', claims_lib.LESSON) == role
          and c['verdict'] != stats.NOT_APPLICABLE]


# Why a row is inconclusive, as the scorecard says it: what its `measured`
# text shows (the gate that stopped a direction, or a test that could not
# decide), first match; one rate where a grid was needed (its `gates`).
BLOCKED = (('at an end of the grid', 'grid end'),
           ('still learning', 'still learning'),
           ('no pair differs', 'no pair differs'),
           ('so it leaves its family', 'cannot decide'),
           ('tied at the ceiling', 'censored'))


def row_answer(c: dict) -> str:
  """A row's verdict as the scorecard reads it. Held and did not hold count
  from any part (power bounds what a part can miss, not what it found); an
  inconclusive counts only from a part its plan powered ('unpowered' where
  nothing else is said), and says what stopped it where something did (one
  rate, a failure still learning, pairs that do not differ); not
  applicable is no answer. 'split' where the parts that count disagree."""
  said = set()
  for part, v in c['verdicts'].items():
    if v == stats.NOT_APPLICABLE:
      continue
    v = stats.INCONCLUSIVE if v.startswith(stats.INCONCLUSIVE) else v
    if v != stats.INCONCLUSIVE or c.get('powered', {}).get(part, True):
      said.add(v)
  if said == {stats.INCONCLUSIVE} or not said:
    if gates_lib.one_rate(c.get('gates')):
      return 'one rate'
    why = next((name for text, name in BLOCKED
                if text in c.get('measured', '')), None)
    if why:
      return why
  if not said:
    return 'unpowered'
  return 'split' if len(said) > 1 else said.pop()


def family_answer(rows: list[dict]) -> str:
  """One family's answer: 'holds', 'does not hold', 'holds for X; not for
  Y' (where the verdict depends on the setting, each setting named), or
  'inconclusive', from its rows' powered verdicts; with the count."""
  by = {}
  for c in rows:
    by.setdefault(row_answer(c), []).append(c['label'] or c['experiment'])
  n = len(rows)
  names = lambda key: ', '.join(dict.fromkeys(by[key]))
  if set(by) == {stats.HELD}:
    return f'holds ({n} of {n} rows)'
  if set(by) == {stats.NOT_HELD}:
    return f'does not hold ({n} of {n} rows)'
  if set(by) == {'unpowered'}:
    return (f'not answered: inconclusive where every part\'s plan gave it '
            f'under 80% power ({n} row{"s" * (n > 1)})')
  out = []
  for key, what in ANSWERS:
    if key in by:
      out.append(f'{what} {names(key)}')
  return ('; '.join(out) + f' ({len(by.get(stats.HELD, []))} of {n} rows '
          'held)')


# The answers a family's rows can give, in the order a mixed family names
# them (its headline is the first named row's).
ANSWERS = ((stats.HELD, 'holds for'), (stats.NOT_HELD, 'not for'),
                    ('split', 'split between powered parts for'),
           (stats.INCONCLUSIVE, 'inconclusive for'),
           ('no pair differs', 'inconclusive, no pair differing, for'),
           ('cannot decide', 'inconclusive, its data too few to decide, for'),
           ('still learning', 'inconclusive, still learning, for'),
           ('grid end', 'inconclusive, its best rate at an end of the grid, '
                        'for'),
           ('censored', 'inconclusive, pairs tied at the longest length '
                        'tested, for'),
           ('one rate', 'inconclusive at one rate for'),
           ('unpowered', 'inconclusive, its plan under 80% power, for'))


def answers(claims: list[dict]) -> list[str]:
  """Per family of `claims` (in order): its name and its answer, beside it
  the headline of the row its answer names first."""
  families = {}
  for c in claims:
    families.setdefault(c['family'] or c['claim'], []).append(c)
  out = []
  for family, rows in families.items():
    order = [key for key, _ in ANSWERS]
    lead = min(rows, key=lambda c: order.index(row_answer(c)))
    out.append(f'{family[0].upper()}{family[1:]}: **{family_answer(rows)}**'
               + (f' ({lead["headline"]})' if lead.get('headline') else ''))
  return out


def answered(c: dict) -> str:
  """A counted row's verdict as its answer counts it: held, did not hold,
  split, or inconclusive, underpowered only where a part's verdict says so
  (held out of reach at its seeds; a plan under 80% power is not that)."""
  answer = row_answer(c)
  if answer in (stats.HELD, stats.NOT_HELD) or answer == 'split':
    return c['verdict'] if answer == 'split' else answer
  under = any(v.startswith(stats.INCONCLUSIVE + ' (underpowered')
              for v in c['verdicts'].values())
  return stats.INCONCLUSIVE + (' (underpowered)' if under else '')


def unanswered(every: list[dict]) -> list[str]:
  """The lesson families of `every` whose rows are all not applicable: not
  answered, with the count."""
  families = {}
  for c in every:
    if c.get('role', claims_lib.LESSON) == claims_lib.LESSON:
      families.setdefault(c['family'] or c['claim'], []).append(c)
  return [f'{family[0].upper()}{family[1:]}: **not answered: not applicable '
          f'in every row ({len(rows)}), each saying why**'
          for family, rows in families.items()
          if all(c['verdict'] == stats.NOT_APPLICABLE for c in rows)]


def scorecard(claims: list[dict], link: str = '') -> str:
  """One row per claim of the lesson: its words, its answer (per family of
  the rows that test the lesson's own sentence: holds, does not hold, or
  holds only for some settings, from the verdicts of powered parts), the
  count of those rows, and a link to its section of the report (`link`
  before the anchor: the report's path from where the table is read).
  Side claims, sanity checks and not-applicable rows are not counted
  (`side_claims` lists the side claims)."""
  lines = ['| # | The lesson says | The answer | Rows counted | Section |',
           '|---|---|---|---|---|']
  for number, (title, words) in LESSON.items():
    every = [c for c in claims if c['lesson'] == number]
    mine = counted(every)
    if not mine:
      answer = counts = ('the task the other rows train on' if number == 1
                         else 'no row to count (side claims, sanity checks '
                         'or not applicable only)' if every
                         else 'not measured in this run')
    else:
      answer = '; '.join(answers(mine) + unanswered(every))
      counts = verdict_counts([answered(c) for c in mine])
    lines.append(f'| {number} | **{title}**: {words} | {answer} | {counts} | '
                 f'[§{number}]({link}#{anchor(number)}) |')
  return '\n'.join(lines)


def side_claims(claims: list[dict], link: str = '') -> str:
  """The side claims (this project's, beside the lesson), per family, and
  what is shown but not counted: sanity checks and not-applicable rows."""
  side = counted(claims, claims_lib.SIDE)
  lines = ['| # | Side claim | The answer | Rows | Section |',
           '|---|---|---|---|---|']
  for number in LESSON:
    mine = [c for c in side if c['lesson'] == number]
    families = {}
    for c in mine:
      families.setdefault(c['family'] or c['claim'], []).append(c)
    for rows, answer in zip(families.values(), answers(mine)):
      lines.append(f'| {number} | {answer.split(": **")[0]} | '
                   f'**{answer.split(": **", 1)[1]} | '
                   f'{verdict_counts([answered(c) for c in rows])} | '
                   f'[§{number}]({link}#{anchor(number)}) |')
  sanity = counted(claims, claims_lib.SANITY)
  na = [c for c in claims if c['verdict'] == stats.NOT_APPLICABLE]
  failed = [c['claim'] for c in sanity if c['verdict'] != stats.HELD]
  text = '\n'.join(lines) if len(lines) > 2 else 'No side claim in this run.'
  return text + (
      f'\n\nShown in their sections, not counted: {len(sanity)} sanity '
      f'checks (checks that cannot fail by construction: '
      f'{verdict_counts([c["verdict"] for c in sanity]) or "none"}) and '
      f'{len(na)} rows not applicable (each says why: a model that did not '
      'learn what the claim is about).' + (
          ' **Sanity checks not held**: ' + '; '.join(failed)
          if failed else ''))
