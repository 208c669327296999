"""A corpus of a few hundred varied English sentences for tuning and checking kcc's tagger and
normaliser against upstream KPipeline (bench/g2p_agreement.py). Built from templates with a
fixed seed, so every run sees the same sentences. The held-out set the suite asserts on
(tests/test_g2p_upstream.py) is written by hand and shares no sentence with this one.
"""
from __future__ import annotations

import random

# Heteronyms of misaki's gold lexicon as (word, noun/adjective phrase, verb phrase, past form).
HETERONYMS = [
    ("record", "the record was broken", "they record every song", "recorded"),
    ("present", "a present for you", "we present the results", "presented"),
    ("object", "the object on the table", "I object to this plan", "objected"),
    ("project", "the project is late", "they project the image", "projected"),
    ("permit", "a parking permit", "they permit dogs", "permitted"),
    ("desert", "the hot desert", "soldiers desert the army", "deserted"),
    ("content", "the content of the box", "she seems content", "contented"),
    ("increase", "a sharp increase", "we increase the price", "increased"),
    ("estimate", "a rough estimate", "you estimate the cost", "estimated"),
    ("separate", "separate rooms", "we separate the eggs", "separated"),
    ("perfect", "a perfect day", "they perfect their craft", "perfected"),
    ("close", "a close friend", "please close the door", "closed"),
    ("use", "the use of force", "we use the tools", "used"),
    ("live", "a live show", "they live in Paris", "lived"),
    ("tear", "a tear on her cheek", "they tear the paper", "tore"),
    ("wind", "the cold wind", "you wind the clock", "wound"),
    ("bow", "a red bow", "actors bow to the crowd", "bowed"),
    ("minute", "a minute later", "a minute detail", "minute"),
    ("conduct", "his conduct", "they conduct the survey", "conducted"),
    ("contract", "the contract", "metals contract in the cold", "contracted"),
    ("produce", "fresh produce", "farms produce milk", "produced"),
    ("refuse", "the refuse bin", "they refuse to pay", "refused"),
    ("subject", "the subject of the talk", "they subject him to tests", "subjected"),
    ("suspect", "the main suspect", "we suspect a leak", "suspected"),
    ("progress", "good progress", "the talks progress slowly", "progressed"),
    ("convict", "an escaped convict", "juries convict criminals", "convicted"),
    ("export", "our main export", "we export cars", "exported"),
    ("import", "a cheap import", "they import tea", "imported"),
    ("insult", "a terrible insult", "they insult people", "insulted"),
    ("rebel", "the rebel leader", "teenagers rebel", "rebelled"),
    ("upset", "an upset stomach", "don't upset her", "upset"),
    ("contest", "a singing contest", "they contest the result", "contested"),
    ("conflict", "the conflict", "the dates conflict", "conflicted"),
    ("combine", "a combine harvester", "we combine the data", "combined"),
    ("attribute", "a key attribute", "they attribute it to luck", "attributed"),
    ("compound", "a chemical compound", "delays compound the problem", "compounded"),
    ("console", "the game console", "friends console her", "consoled"),
    ("digest", "a news digest", "snakes digest slowly", "digested"),
    ("entrance", "the main entrance", "the music will entrance you", "entranced"),
    ("invalid", "an invalid password", "the old invalid", "invalid"),
    ("transport", "public transport", "trucks transport goods", "transported"),
    ("abuse", "child abuse", "they abuse their power", "abused"),
    ("excuse", "a poor excuse", "please excuse me", "excused"),
    ("advocate", "a strong advocate", "we advocate reform", "advocated"),
    ("graduate", "a recent graduate", "students graduate in June", "graduated"),
    ("moderate", "a moderate risk", "they moderate the forum", "moderated"),
    ("alternate", "an alternate route", "the seasons alternate", "alternated"),
    ("polish", "shoe polish", "we polish the silver", "polished"),
    ("overall", "the overall cost", "overall, it went well", "overall"),
]
SUBJECTS = ["I", "You", "We", "They", "She", "He", "My sister", "The team", "Our neighbors", "Tom"]
PAST_WORDS = ["yesterday", "last week", "two days ago", "last night", "in 2019"]
READ_FRAMES = [
    "{s} read the book {t}.", "{s} read the letter twice.", "{s} read it every morning.", "Have you read the news?",
    "{s} will read the report tomorrow.", "{s} had read the whole series.", "The sign read 'Closed'.",
    "Please read this carefully.", "{s} wound the rope around the post.", "The soldier's wound healed.",
    "{s} wound up the toy.", "It was a deep wound.", "{s} wind the clock {t}.", "The wind was strong {t}.",
    "{s} used to live there.", "{s} used the car {t}.", "{s} is used to the cold.", "It is a used car.",
    "{s} lead the group.", "The pipes are made of lead.", "{s} led the team to victory {t}.",
    "{s} live near the park.", "The concert was broadcast live.", "{s} tear up old letters.",
    "A tear rolled down her face.", "{s} read a lot as a child.", "Did {o} read the paper?",
    "{s} reread the note.", "{s} close the shop at nine.", "The store is close to home.",
]
NUMBER_FRAMES = [
    "The ticket costs ${d}.{c}.", "It weighs {n} kilograms.", "{n} people came to the show.",
    "The temperature reached {k}°C.", "Set the oven to {k}°F.", "Sales grew {k}% last year.",
    "Chapter {k} starts on page {n}.", "He was born in {y}.", "The meeting is at {h}:{m} PM.",
    "We sold {big} units.", "The price fell to £{d}.", "It cost €{d} in total.",
    "The score was {k} to {k2}.", "Flight {k2} leaves at {h} AM.", "She finished {o2} in the race.",
    "About {k}.{k2} percent agreed.", "The population is {big}.", "Turn left after {k2} miles.",
    "My dad turned {k} in {y}.", "Only {k}% of {n} voters said yes.",
]
GENERAL = [
    "The quick brown fox jumps over the lazy dog.", "She sells sea shells by the sea shore.",
    "Could you please pass the salt?", "Our flight was delayed by three hours.",
    "Dr. Jones works at the hospital downtown.", "Mr. and Mrs. Brown arrived early.",
    "The U.S. economy grew faster than expected.", "NASA launched a new satellite.",
    "The FBI and the CIA share some data.", "Let's meet at the café.",
    "It's a beautiful day, isn't it?", "Why don't we go for a walk?",
    "The children played in the garden until dark.", "He can't believe what happened.",
    "I'd like a cup of tea, please.", "They've already left for the airport.",
    "This is the best pizza in town!", "Where are my keys?", "The cat sat on the mat.",
    "A bird in the hand is worth two in the bush.", "The results were mixed, to say the least.",
    "Turn off the lights when you leave.", "She asked whether the shop was open.",
    "Every student needs a pencil and a notebook.", "That was an amazing performance.",
    "He said that that was the problem.", "There are many reasons to stay.",
    "The doctor told him to rest for a week.", "Which way is the station?",
    "I have never seen anything like it.", "The old man and the sea is a short novel.",
    "My phone battery died again.", "Can you hear me now?", "The museum opens at ten.",
    "He lives by the river.", "She walked by without a word.", "The rain in Spain falls mainly on the plain.",
    "Is this the right address?", "We need more time to finish.", "The book is on the shelf by the door.",
]


def corpus(seed: int = 34) -> list[str]:
    rnd = random.Random(seed)
    out: list[str] = []
    for word, noun, verb, past in HETERONYMS:
        s = rnd.choice(SUBJECTS)
        out += [f"{noun[0].upper()}{noun[1:]}.", f"{verb[0].upper()}{verb[1:]}.",
                f"{s} wanted to {word} it.", f"{s} {past} it {rnd.choice(PAST_WORDS)}."]
    for frame in READ_FRAMES:
        for _ in range(2):
            out.append(frame.format(s=rnd.choice(SUBJECTS), t=rnd.choice(PAST_WORDS),
                                    o=rnd.choice(["you", "they", "she"])))
    for frame in NUMBER_FRAMES:
        for _ in range(3):
            out.append(frame.format(d=rnd.randint(1, 999), c=f"{rnd.randint(0, 99):02d}", n=rnd.randint(2, 9999),
                                    k=rnd.randint(1, 99), k2=rnd.randint(1, 99), y=rnd.randint(1900, 2030),
                                    h=rnd.randint(1, 12), m=f"{rnd.randint(0, 59):02d}",
                                    big=f"{rnd.randint(1, 999)},{rnd.randint(0, 999):03d}",
                                    o2=rnd.choice(["1st", "2nd", "3rd", "4th", "21st"])))
    out += GENERAL
    return list(dict.fromkeys(out))


if __name__ == "__main__":
    for s in corpus():
        print(s)
