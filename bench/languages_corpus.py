"""A fixed sentence set per language, for kcc's G2P, durations and intelligibility against
upstream KPipeline and torch (bench/languages_upstream.py, tests/test_languages.py).
Voices: upstream's default voice per language."""
from __future__ import annotations

# language -> (upstream KPipeline lang_code, default voice, Whisper language code)
LANGUAGES = {
    "en-gb": ("b", "bf_emma", "en"), "es": ("e", "ef_dora", "es"), "fr-fr": ("f", "ff_siwis", "fr"),
    "hi": ("h", "hf_alpha", "hi"), "it": ("i", "if_sara", "it"), "pt-br": ("p", "pf_dora", "pt"),
    "ja": ("j", "jf_alpha", "ja"), "zh": ("z", "zf_xiaobei", "zh"),
}

SENTENCES = {
    "en-gb": ["The weather in London was rather grey this morning.",
              "She bought a new colour printer for the office.",
              "Could you tell me the way to the railway station?",
              "Our neighbours have a lovely garden full of roses.",
              "The programme starts at half past seven.",
              "He put the tomatoes in the fridge."],
    "es": ["Hola, ¿cómo estás? Me llamo Juan y tengo veinte años.",
           "¡Qué día tan bonito! Vamos a la playa.",
           "El tren sale de la estación a las ocho.",
           "Mi hermana trabaja en un hospital de Madrid.",
           "Los niños juegan en el parque después de la escuela.",
           "Necesito comprar pan, leche y huevos."],
    "fr-fr": ["Bonjour, comment allez-vous? Il fait beau aujourd'hui.",
              "Les enfants jouent dans le jardin depuis trois heures.",
              "Je voudrais un café et un croissant, s'il vous plaît.",
              "La bibliothèque ferme à six heures du soir.",
              "Nous partons en vacances à la mer cet été.",
              "Mon frère habite à Lyon depuis deux ans."],
    "hi": ["नमस्ते, आप कैसे हैं? मेरा नाम राम है।",
           "आज मौसम बहुत अच्छा है।",
           "मैं हर सुबह चाय पीता हूँ।",
           "बच्चे पार्क में खेल रहे हैं।",
           "यह किताब बहुत दिलचस्प है।",
           "हम कल दिल्ली जाएंगे।"],
    "it": ["Ciao, come stai? Oggi fa bel tempo.",
           "La cena è pronta alle otto e mezza.",
           "Mio padre lavora in una banca a Roma.",
           "Vorrei un bicchiere d'acqua, per favore.",
           "I bambini giocano nel giardino della nonna.",
           "Domani andiamo al mare con gli amici."],
    "pt-br": ["Olá, tudo bem? Hoje está um dia bonito.",
              "O gato dorme em cima da mesa da cozinha.",
              "Eu moro em São Paulo há cinco anos.",
              "Vamos ao cinema no sábado à noite.",
              "A professora explicou a lição com paciência.",
              "Preciso comprar frutas e legumes na feira."],
    "ja": ["こんにちは、元気ですか？", "今日は良い天気ですね。", "東京タワーへ行きましょう！", "私の名前は田中です。",
           "お茶を飲みながら、新聞を読みます。", "日本語の音声合成はむずかしい。"],
    "zh": ["你好，今天天气很好。", "北京是中国的首都，人口很多。", "我每天早上喝一杯咖啡。",
           "孩子们在公园里玩。", "这本书非常有意思。", "我们明天去上海。"],
}
